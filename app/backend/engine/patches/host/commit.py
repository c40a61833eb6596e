"""The KDA ReplaySSM commit fed the step indices SGLang's verify already prepared.

SGLang 0.5.23's verify (`srt/speculative/eagle_worker_common.py`) computes each request's
last accepted step and its mamba-track step in one fused kernel
(`prepare_verify_commit_outputs`, at top-1) and hands them to `commit_mamba_states_after_verify`
(`srt/speculative/spec_utils.py`) as `prepared_step_indices`. That function's GDN branches use
them; its KDA ReplaySSM branch ignores them and recomputes the same two index tensors with
about 20 eager ops a round (14 of them only when the radix cache turns mamba tracking on).

`commit_fed_prepared(stock)` is the commit ling-chat installs in their place: where the KDA
ReplaySSM branch would run and the verify prepared the indices, it makes that branch's one
kernel call (`commit_kda_replayssm_after_verify`, looked up at call time as SGLang does) with
the prepared indices; otherwise it calls SGLang's own commit. The indices are equal in value
(the kernel's are int64, the eager ones take `accept_index`'s dtype; the fold kernel and the
conv scatter cast both to int32 before use), so the committed state is bitwise the same
(tests/backend/engine/patches/host/test_prepared_commit.py runs both on CPU tensors, the
fused kernel through Triton's interpreter; tests/gpu/test_replayssm_gpu.py compares the KDA
state on the GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan

COUNTS: Counter[str] = Counter()
"""`prepared`: commits fed the verify's indices; `stock`: commits left to SGLang's function."""
MARK = "ling_chat_fed_prepared"
"""The attribute that marks ling-chat's commit (the evidence reads it off the live binding)."""


def kda_fold_pool(target_worker: Any) -> Any:
    """The KDA state pool when SGLang's commit would take its KDA ReplaySSM branch, else None.

    That branch needs the pool to fold every commit (`replayssm_spec_fold`) of a KDA model
    (`replayssm_is_kda`); such a pool exists only on a hybrid linear-attention model, so the
    commit's first test (`mambaish_config`) always passes where this one does.
    """
    pool = getattr(target_worker.model_runner.req_to_token_pool, "mamba_pool", None)
    fold = getattr(pool, "replayssm_spec_fold", False)
    return pool if fold and getattr(pool, "replayssm_is_kda", False) else None


def commit_fed_prepared(stock: Callable[..., None]) -> Callable[..., None]:
    """SGLang's `commit_mamba_states_after_verify` (`stock`), its KDA ReplaySSM branch fed
    the verify's prepared step indices."""

    def commit_mamba_states_after_verify(
        target_worker: Any,
        batch: Any,
        accept_lens: Any,
        accept_index: Any,
        draft_token_num: int,
        prepared_step_indices: tuple[Any, Any] | None = None,
    ) -> None:
        if (
            prepared_step_indices is None
            or batch.forward_mode.is_idle()
            or accept_index.numel() == 0
            or kda_fold_pool(target_worker) is None
        ):
            COUNTS["stock"] += 1
            return stock(
                target_worker,
                batch,
                accept_lens,
                accept_index,
                draft_token_num,
                prepared_step_indices=prepared_step_indices,
            )
        from sglang.kernels.ops.attention.linear import kda_replayssm_spec_decode as kda
        from sglang.srt.layers.attention.linear.utils import pp_spec_stable_rows_enabled

        COUNTS["prepared"] += 1
        req_pool = target_worker.model_runner.req_to_token_pool
        last_correct_step_indices, mamba_steps_to_track = prepared_step_indices
        bs = accept_lens.shape[0]
        kda.commit_kda_replayssm_after_verify(
            spec_state=req_pool.get_speculative_mamba2_params_all_layers(),
            state_batch_indices=req_pool.get_mamba_indices(batch.req_pool_indices),
            accept_lens=accept_lens,
            last_correct_step_indices=last_correct_step_indices,
            mamba_track_indices=batch.mamba_track_indices,
            mamba_steps_to_track=mamba_steps_to_track,  # None unless tracking, as SGLang's
            src_indices_raw=(
                batch.req_pool_indices[:bs] if pp_spec_stable_rows_enabled() else None
            ),
            null_block_id=-1,
        )

    setattr(commit_mamba_states_after_verify, MARK, True)
    commit_mamba_states_after_verify.__wrapped__ = stock  # type: ignore[attr-defined]
    return commit_mamba_states_after_verify


def install(plan: PatchPlan) -> None:
    """Put the fed commit where SGLang's verify (and its PP scheduler) look it up."""
    from sglang.srt.speculative import eagle_worker_common, spec_utils

    fed = commit_fed_prepared(spec_utils.commit_mamba_states_after_verify)
    spec_utils.commit_mamba_states_after_verify = fed
    eagle_worker_common.commit_mamba_states_after_verify = fed


def live_commit() -> Callable[..., Any]:
    """The commit SGLang's NEXTN verify calls in this process (its module's global)."""
    from sglang.srt.speculative import eagle_worker_common

    return eagle_worker_common.commit_mamba_states_after_verify


def collect(calls: Callable[..., Any] | None = None) -> dict[str, Any]:
    """The `prepared_commit` fact: the commit the verify calls (`calls`; None: the live one)
    and the counts."""
    calls = live_commit() if calls is None else calls
    where = f"{getattr(calls, '__module__', '?')}.{getattr(calls, '__qualname__', '?')}"
    return {
        "verify_calls": where,
        "fed_prepared": bool(getattr(calls, MARK, False)),
        "prepared_commits": COUNTS["prepared"],
        "stock_commits": COUNTS["stock"],
    }
