"""The KDA ReplaySSM verify's proof: the pool's `replayssm` fact in, whether it is engaged out.

A pure function over what app/backend/engine/patches/replayssm.py collects in SGLang's scheduler;
the DSpark rules and, for a NEXTN profile with the lever, app/backend/proof/rules.py judge with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TITLE = "KDA ReplaySSM verify ring"
FIX = (
    "keep enable_linear_replayssm_spec on with linear_replayssm_cache_len a power of two "
    ">= 2x the verify window (32 for DSpark's 9 tokens, 8 for NEXTN's 4)"
)


def judge(fact: Mapping[str, Any], window: int) -> tuple[bool, str]:
    """Whether the KDA pool folds each verify's commits through an allocated ring that is a
    power of two >= 2x the `window` tokens a verify takes, and the evidence."""
    ring = fact["ring_len"] or 0
    ok = (
        fact["spec_enabled"]
        and fact["kda_fold"]
        and fact["ring_allocated"]
        and ring > 0
        and ring & (ring - 1) == 0
        and ring >= 2 * window
    )
    return bool(ok), (
        f"spec verify on: {fact['spec_enabled']}, KDA fold-every-commit: {fact['kda_fold']}; "
        f"ring {ring} allocated: {fact['ring_allocated']} (needs a power of two >= "
        f"{2 * window}); {fact['commits']} ReplaySSM commits before the warm-up"
    )
