"""KDA ReplaySSM verify evidence, read in SGLang's scheduler (judged by proof_replayssm.py).

SGLang attributes read: the target runner's `req_to_token_pool.mamba_pool`
(`enable_linear_replayssm_spec`, `replayssm_spec_fold`, `linear_replayssm_cache_len`,
`mamba_cache.replayssm_rawv`, the ring of raw inputs). Wrapped:
`kda_replayssm_spec_decode.commit_kda_replayssm_after_verify`, to count the commits.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

COUNTS: Counter[str] = Counter()
"""`commits`: ReplaySSM commits after a verify, since the scheduler started."""


def install() -> None:
    """Count the ReplaySSM commits."""
    from sglang.kernels.ops.attention.linear import kda_replayssm_spec_decode as kda

    commit = kda.commit_kda_replayssm_after_verify

    def commit_kda_replayssm_after_verify(*args: Any, **kwargs: Any) -> Any:
        COUNTS["commits"] += 1
        return commit(*args, **kwargs)

    kda.commit_kda_replayssm_after_verify = commit_kda_replayssm_after_verify


def collect(scheduler: Any) -> dict[str, Any]:
    """The KDA state pool's verify mode (a raised error is reported by evidence.collect)."""
    pool = scheduler.tp_worker.model_runner.req_to_token_pool.mamba_pool
    return {
        "spec_enabled": bool(getattr(pool, "enable_linear_replayssm_spec", False)),
        "kda_fold": bool(getattr(pool, "replayssm_spec_fold", False)),
        "ring_len": getattr(pool, "linear_replayssm_cache_len", None),
        "ring_allocated": getattr(pool.mamba_cache, "replayssm_rawv", None) is not None,
        "commits": COUNTS["commits"],
    }
