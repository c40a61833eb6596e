"""Least squares of a unit's time on its bytes and kernel calls, against published Spark TPOTs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Fit:
    """The fitted Spark: one sustained bandwidth and one fixed cost per kernel call."""

    bandwidth_gbps: float
    fixed_us: float
    constrained: bool
    """True when the best fit had a negative fixed cost and c was held at 0."""

    def bandwidth_ms(self, nbytes: float) -> float:
        """Time `nbytes` take at the fitted bandwidth, ms."""
        return nbytes / (self.bandwidth_gbps * 1e9) * 1e3

    def fixed_ms(self, calls: float) -> float:
        """Fixed cost of `calls` kernel calls, ms."""
        return calls * self.fixed_us / 1e3


@dataclass(frozen=True, slots=True)
class FitPoint:
    """One published TPOT and the load it is fitted against."""

    profile: str
    bytes: float
    calls: float
    published_ms: float


def fit_spark(points: Sequence[FitPoint]) -> Fit:
    """Least squares of published_ms = bytes / BW + calls x c over `points`.

    Raises:
        ValueError: With fewer than two points, or when no positive bandwidth fits.
    """
    if len(points) < 2:
        raise ValueError("the fit needs at least two published TPOTs with a kernel profile")
    sbb = math.fsum(p.bytes**2 for p in points)
    sbn = math.fsum(p.bytes * p.calls for p in points)
    snn = math.fsum(p.calls**2 for p in points)
    sbt = math.fsum(p.bytes * p.published_ms for p in points)
    snt = math.fsum(p.calls * p.published_ms for p in points)
    det = sbb * snn - sbn**2
    per_byte, per_call = math.nan, math.nan
    if det > 1e-12 * sbb * snn:
        per_byte = (sbt * snn - snt * sbn) / det
        per_call = (sbb * snt - sbn * sbt) / det
    constrained = not per_call >= 0.0 or not per_byte > 0.0
    if constrained:
        per_byte, per_call = sbt / sbb, 0.0
    if not per_byte > 0.0:
        raise ValueError("no positive bandwidth fits the published TPOTs")
    return Fit(bandwidth_gbps=1e-6 / per_byte, fixed_us=per_call * 1e3, constrained=constrained)
