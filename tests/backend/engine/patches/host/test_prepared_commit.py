"""The KDA ReplaySSM commit fed the verify's prepared indices: exact against SGLang's own
commit on CPU tensors (the fused kernel under Triton's interpreter), and SGLang's commit
wherever its KDA branch would not run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from app.backend.engine.patches.boundary import PatchPlan
from app.backend.engine.patches.host import commit
from tests.support.commit_cases import run_cases

CASES = 300


@pytest.mark.slow
def test_the_fed_commit_hands_the_kda_kernels_what_sglangs_own_commit_does() -> None:
    pytest.importorskip("torch", reason="needs torch and SGLang (the engine extra)")
    pytest.importorskip("sglang", reason="needs SGLang (the engine extra)")
    report = run_cases(CASES, "cpu")
    assert report["differences"] == []
    assert report["cases"] == report["fed_commits"] == CASES  # every case took the fed path
    # the cases reach both of the branch's index computations, crossings included
    assert report["tracking"] > CASES // 3
    assert report["crossings"] > CASES // 10


def test_sglang_is_installed_with_the_fed_commit_where_its_verify_looks_it_up(monkeypatch):
    pytest.importorskip("sglang", reason="needs SGLang (the engine extra)")
    from sglang.srt.speculative import eagle_worker_common, spec_utils

    monkeypatch.setattr(
        spec_utils, "commit_mamba_states_after_verify", spec_utils.commit_mamba_states_after_verify
    )
    monkeypatch.setattr(
        eagle_worker_common,
        "commit_mamba_states_after_verify",
        eagle_worker_common.commit_mamba_states_after_verify,
    )
    stock = spec_utils.commit_mamba_states_after_verify
    assert not commit.collect(commit.live_commit())["fed_prepared"]
    commit.install(PatchPlan())
    fact = commit.collect(commit.live_commit())
    assert fact["fed_prepared"]
    assert spec_utils.commit_mamba_states_after_verify is commit.live_commit()
    assert commit.live_commit().__wrapped__ is stock


def _worker(fold: bool = True, kda: bool = True) -> Any:
    pool = SimpleNamespace(replayssm_spec_fold=fold, replayssm_is_kda=kda)
    return SimpleNamespace(
        model_runner=SimpleNamespace(req_to_token_pool=SimpleNamespace(mamba_pool=pool))
    )


class _Index:
    def __init__(self, n: int) -> None:
        self.n = n

    def numel(self) -> int:
        return self.n


def _batch(idle: bool = False) -> Any:
    return SimpleNamespace(forward_mode=SimpleNamespace(is_idle=lambda: idle))


@pytest.mark.parametrize(
    ("worker", "batch", "index", "steps"),
    [
        (_worker(), _batch(), _Index(4), None),  # not prepared (top-k > 1, or a CPU verify)
        (_worker(), _batch(idle=True), _Index(4), ("last", "track")),
        (_worker(), _batch(), _Index(0), ("last", "track")),
        (_worker(kda=False), _batch(), _Index(4), ("last", "track")),  # GDN: SGLang's own
        (_worker(fold=False), _batch(), _Index(4), ("last", "track")),  # the recurrent verify
    ],
)
def test_every_other_commit_is_sglangs_own_with_the_same_arguments(worker, batch, index, steps):
    calls: list[tuple[Any, ...]] = []

    def stock(*args: Any, **kwargs: Any) -> None:
        calls.append((*args, kwargs))

    before = dict(commit.COUNTS)
    commit.commit_fed_prepared(stock)(worker, batch, "lens", index, 4, prepared_step_indices=steps)
    assert calls == [(worker, batch, "lens", index, 4, {"prepared_step_indices": steps})]
    assert commit.COUNTS["stock"] == before.get("stock", 0) + 1
    assert commit.COUNTS["prepared"] == before.get("prepared", 0)


def test_the_fact_names_the_commit_the_verify_calls() -> None:
    fed = commit.commit_fed_prepared(lambda *a, **k: None)
    assert commit.collect(fed)["fed_prepared"]
    assert commit.collect(fed)["verify_calls"].endswith("commit_mamba_states_after_verify")

    def commit_mamba_states_after_verify() -> None: ...

    assert not commit.collect(commit_mamba_states_after_verify)["fed_prepared"]
