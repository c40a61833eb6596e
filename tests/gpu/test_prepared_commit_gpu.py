"""The KDA ReplaySSM commit fed the verify's prepared indices, on the GPU (GPU only).

tests/support/commit_cases.py over 300 random batch-1 verifies, on CUDA tensors: SGLang's own
fused kernel (`prepare_verify_commit_outputs`, compiled) makes the indices the fed commit
hands the KDA kernels, SGLang's own KDA ReplaySSM branch recomputes them with its eager ops;
the two must be equal in every case. (The state the kernels then fold is compared bitwise
by tests/gpu/test_replayssm_gpu.py, four engine boots.)

    python -m pytest tests/gpu/test_prepared_commit_gpu.py --run-gpu -s
"""

from __future__ import annotations

import pytest

from tests.support.commit_cases import run_cases

pytestmark = pytest.mark.gpu
CASES = 300


def test_the_fed_commit_hands_the_kda_kernels_sglangs_own_indices_on_the_gpu() -> None:
    report = run_cases(CASES, "cuda")
    print(f"on the GPU: {report}")
    assert report["device"] == "cuda"
    assert report["differences"] == []
    assert report["cases"] == report["fed_commits"] == CASES
    assert report["crossings"] > CASES // 10
