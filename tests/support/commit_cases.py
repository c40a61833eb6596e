"""Batch-1 verify commits on CPU tensors, run through SGLang 0.5.23's own KDA ReplaySSM commit
and through ling-chat's commit fed the verify's prepared indices (needs torch and SGLang).

A case is one verify's outcome: accept lengths (1..4 tokens, the bonus included), the
requests' lengths before it (near the mamba-track grid, so that commits cross it), slots,
and mamba tracking on or off. Both commits run with `commit_kda_replayssm_after_verify`
replaced by a recorder: what each would hand the KDA kernels is compared. The prepared
indices come from SGLang's own fused kernel (`prepare_verify_commit_outputs`), which runs on
CPU tensors under Triton's interpreter (TRITON_INTERPRET=1, set before SGLang's import).

    TRITON_INTERPRET=1 python -m tests.support.commit_cases [CASES]   # JSON on stdout
    python -m tests.support.commit_cases CASES cuda                    # on a GPU, compiled
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

DRAFT_TOKENS = 4
"""NEXTN's verify window: 3 draft tokens and the bonus."""
TRACK_GRID = 64
"""The mamba-track interval at ling-chat's page size 64 (`mamba_track_grid(64)`)."""
SPEC_STATE = object()
"""Stands in for the pool's SpeculativeState: passed through, never read."""
DEVICE = ["cpu"]
"""Where the cases' tensors live (`cuda`: the fused kernel runs compiled, on the GPU)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One verify's outcome for `len(accept)` requests."""

    accept: tuple[int, ...]
    seq_lens: tuple[int, ...]
    req_pool_indices: tuple[int, ...]
    tracking: bool


def random_cases(count: int, seed: int = 0) -> list[Case]:
    """`count` cases, most of batch 1, a few of 2-3 requests; lengths within a round of the
    grid half the time, so that about a quarter of the commits cross it."""
    rng = random.Random(seed)
    cases = []
    for n in range(count):
        bs = 1 if n % 8 else rng.randint(2, 3)
        lens = []
        for _ in range(bs):
            base = TRACK_GRID * rng.randint(1, 60)
            lens.append(
                base - rng.randint(0, DRAFT_TOKENS)
                if rng.random() < 0.5
                else base + rng.randint(0, 63)
            )
        cases.append(
            Case(
                accept=tuple(rng.randint(1, DRAFT_TOKENS) for _ in range(bs)),
                seq_lens=tuple(lens),
                req_pool_indices=tuple(rng.sample(range(1, 64), bs)),
                tracking=rng.random() < 0.5,
            )
        )
    return cases


def verify_outputs(case: Case) -> tuple[Any, Any, Any, Any]:
    """What the verify holds after sampling: `predict`, `accept_index`, `accept_lens` (int32,
    as `eagle_sample` makes them) and the batch's `seq_lens` (int64)."""
    import torch

    bs = len(case.accept)
    accept_index = torch.full((bs, DRAFT_TOKENS), -1, dtype=torch.int32)
    for row, n in enumerate(case.accept):
        accept_index[row, :n] = torch.arange(n, dtype=torch.int32) + row * DRAFT_TOKENS
    predict = torch.arange(1000, 1000 + bs * DRAFT_TOKENS, dtype=torch.int32)
    accept_lens = torch.tensor(case.accept, dtype=torch.int32)
    seq_lens = torch.tensor(case.seq_lens, dtype=torch.int64)
    return tuple(t.to(DEVICE[0]) for t in (predict, accept_index, accept_lens, seq_lens))


def prepared(case: Case) -> tuple[Any, Any]:
    """The step indices SGLang's verify prepares, with its own fused kernel and arguments."""
    from sglang.kernels.ops.speculative.eagle import prepare_verify_commit_outputs

    predict, accept_index, accept_lens, seq_lens = verify_outputs(case)
    _lens, _bonus, steps, _draft = prepare_verify_commit_outputs(
        predict,
        accept_index,
        accept_lens,
        seq_lens,
        num_draft_tokens=DRAFT_TOKENS,
        mamba_track_interval=TRACK_GRID if case.tracking else 0,
    )
    return steps


def worker_and_batch(case: Case) -> tuple[Any, Any]:
    """The target worker and batch the commit reads: a KDA pool that folds every commit,
    slot = 100 + request index, tracking slots 200 + request index when tracking is on."""
    import torch

    mapping = torch.arange(100, 164, dtype=torch.int32, device=DEVICE[0])
    pool = SimpleNamespace(replayssm_spec_fold=True, replayssm_is_kda=True)
    req_pool = SimpleNamespace(
        mamba_pool=pool,
        get_speculative_mamba2_params_all_layers=lambda: SPEC_STATE,
        get_mamba_indices=lambda indices: mapping[indices],
    )
    runner = SimpleNamespace(model_config=object(), req_to_token_pool=req_pool)
    indices = torch.tensor(case.req_pool_indices, dtype=torch.int64, device=DEVICE[0])
    batch = SimpleNamespace(
        forward_mode=SimpleNamespace(is_idle=lambda: False),
        req_pool_indices=indices,
        seq_lens=verify_outputs(case)[3],
        mamba_track_indices=(indices + 100).to(torch.int32) if case.tracking else None,
        tree_cache=SimpleNamespace(page_size=64),
    )
    return SimpleNamespace(model_runner=runner), batch


def sglang_without_globals() -> Any:
    """SGLang's spec_utils with the two globals its commit reads outside its arguments pinned:
    the model counts as hybrid linear, the track grid is TRACK_GRID."""
    from sglang.srt.speculative import spec_utils

    spec_utils.mambaish_config = lambda _config: SimpleNamespace()
    spec_utils.mamba_track_grid = lambda _page: TRACK_GRID
    return spec_utils


def recorded_calls(case: Case, commit: Any, steps: Any) -> dict[str, Any]:
    """The arguments `commit` hands `commit_kda_replayssm_after_verify` for `case`."""
    from sglang.kernels.ops.attention.linear import kda_replayssm_spec_decode as kda

    seen: list[dict[str, Any]] = []
    kernel = kda.commit_kda_replayssm_after_verify
    kda.commit_kda_replayssm_after_verify = lambda **kwargs: seen.append(kwargs)
    try:
        worker, batch = worker_and_batch(case)
        _predict, accept_index, accept_lens, _seq = verify_outputs(case)
        commit(worker, batch, accept_lens, accept_index, DRAFT_TOKENS, prepared_step_indices=steps)
    finally:
        kda.commit_kda_replayssm_after_verify = kernel
    assert len(seen) == 1, f"{len(seen)} kernel calls"
    return seen[0]


def differences(stock: dict[str, Any], fed: dict[str, Any]) -> list[str]:
    """Where the two calls' arguments differ in value (the index tensors' dtypes may: the
    KDA kernels cast both to int32)."""
    import torch

    found = []
    for name in sorted(set(stock) | set(fed)):
        a, b = stock.get(name), fed.get(name)
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
            if a.shape != b.shape or not torch.equal(a.to(torch.int64), b.to(torch.int64)):
                found.append(f"{name}: {a.tolist()} != {b.tolist()}")
        elif a is not b and a != b:
            found.append(f"{name}: {a!r} != {b!r}")
    return found


def compare(cases: list[Case]) -> dict[str, Any]:
    """Run every case through both commits; the cases compared and every difference."""
    from app.backend.engine.patches.host.commit import COUNTS, commit_fed_prepared

    spec_utils = sglang_without_globals()
    stock = spec_utils.commit_mamba_states_after_verify
    fed = commit_fed_prepared(stock)
    report: dict[str, Any] = {"cases": 0, "crossings": 0, "tracking": 0, "differences": []}
    for case in cases:
        steps = prepared(case)
        want = recorded_calls(case, stock, None)  # SGLang's branch: it ignores the indices
        got = recorded_calls(case, fed, steps)
        report["cases"] += 1
        report["tracking"] += case.tracking
        track = want["mamba_steps_to_track"]
        report["crossings"] += int((track >= 0).sum()) if track is not None else 0
        report["differences"] += [f"{case}: {d}" for d in differences(want, got)]
    report["fed_commits"] = COUNTS["prepared"]
    return report


def run_cases(cases: int, device: str) -> dict[str, Any]:
    """`compare` over `cases` random cases on `device` in a fresh Python (on the CPU under
    Triton's interpreter): its report, or AssertionError with the process's error's end."""
    env = {**os.environ, **({"TRITON_INTERPRET": "1"} if device == "cpu" else {})}
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.commit_cases", str(cases), device],
        cwd=Path(__file__).resolve().parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    DEVICE[0] = sys.argv[2] if len(sys.argv) > 2 else "cpu"
    report = compare(random_cases(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
    print(json.dumps({**report, "device": DEVICE[0]}))
