"""Which FP8 head kernel runs: pure rules over the timings taken at load (no torch)."""

from __future__ import annotations

import math
from collections.abc import Mapping

TIMED_M = ("1", "4")
"""Decode's token counts per head call: a draft step (1) and a 4-token verify (4)."""

Timings = Mapping[str, Mapping[str, object]]
"""Per candidate, per M (as a string): microseconds, or an error text when it failed."""


def total_us(times: Mapping[str, object]) -> float | None:
    """The candidate's time summed over TIMED_M; None unless it ran at every M."""
    total = 0.0
    for m in TIMED_M:
        value = times.get(m)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value) or value <= 0:
            return None
        total += float(value)
    return total


def pick(timings: Timings) -> str | None:
    """The candidate with the least time summed over TIMED_M (None when none ran).

    Ties go to the candidate listed first, so the order of `timings` is the preference.
    """
    best: tuple[float, str] | None = None
    for name, times in timings.items():
        total = total_us(times)
        if total is not None and (best is None or total < best[0]):
            best = (total, name)
    return None if best is None else best[1]


def floor_us(nbytes: int, gbps: float) -> float:
    """Microseconds to read `nbytes` once at `gbps` (10^9 bytes a second)."""
    return nbytes / (gbps * 1e3)


def floor_share(floor: float, us: float) -> float:
    """How close a kernel's time comes to the byte floor (1.0: at the floor)."""
    return floor / us if us > 0 else 0.0
