"""The KDA ReplaySSM lever's patch: count the commits (app/levers/draft/replayssm.py reads
`COUNTS` through `Sources.patch`).

Wrapped: `kda_replayssm_spec_decode.commit_kda_replayssm_after_verify`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan

COUNTS: Counter[str] = Counter()
"""`commits`: ReplaySSM commits after a verify, since the scheduler started."""


def install(plan: PatchPlan) -> None:
    """Count the ReplaySSM commits."""
    from sglang.kernels.ops.attention.linear import kda_replayssm_spec_decode as kda

    commit = kda.commit_kda_replayssm_after_verify

    def commit_kda_replayssm_after_verify(*args: Any, **kwargs: Any) -> Any:
        COUNTS["commits"] += 1
        return commit(*args, **kwargs)

    kda.commit_kda_replayssm_after_verify = commit_kda_replayssm_after_verify
