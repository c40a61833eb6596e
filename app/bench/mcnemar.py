"""The exact McNemar test: did a profile answer the same questions right as the baseline?"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided p-value of the exact binomial test on `b` and `c` discordant pairs.

    Under the null hypothesis each discordant pair goes either way with probability 1/2:
    p = min(1, 2 * P(X <= min(b, c))) for X ~ Binomial(b + c, 1/2); 1.0 with no discordant pair.
    """
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, not {b} and {c}")
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1))
    return min(1.0, 2 * tail / 2**n)


@dataclass(frozen=True, slots=True)
class PairedCorrectness:
    """Per-question correctness of two runs over the questions both were asked."""

    pairs: int
    both: int
    only_reference: int
    """Right in the reference run (the baseline), wrong in this one."""
    only_this: int
    """Wrong in the reference run, right in this one."""
    neither: int
    p_value: float
    """`mcnemar_exact(only_reference, only_this)`."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def paired_correctness(
    reference: Mapping[Any, bool], this: Mapping[Any, bool]
) -> PairedCorrectness:
    """Pair two runs' {question key: correct} on the keys both have."""
    keys = [key for key in reference if key in this]
    both = sum(reference[k] and this[k] for k in keys)
    only_reference = sum(reference[k] and not this[k] for k in keys)
    only_this = sum(this[k] and not reference[k] for k in keys)
    return PairedCorrectness(
        pairs=len(keys),
        both=both,
        only_reference=only_reference,
        only_this=only_this,
        neither=len(keys) - both - only_reference - only_this,
        p_value=mcnemar_exact(only_reference, only_this),
    )
