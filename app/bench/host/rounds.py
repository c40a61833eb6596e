"""A round's wall and GPU-busy time, per boot and per engine, and their JSON form.

Each value is a long request's less a short one's, over the rounds between them, so that the
prefill and every fixed cost cancel: wall time unprofiled (median over pairs), GPU-busy time
under SGLang's torch profiler (GPU activities only: a round's kernels, copies and sets as
one union of intervals), and the profiled wall time beside it (the profiler's own cost).
What the GPU idles a round is wall less busy: the host's share of the round.
"""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
"""Trace event categories that are the GPU's own work."""


@dataclass(frozen=True, slots=True)
class Timed:
    """One request: seconds from send to its last chunk, and its verify rounds (decode steps
    without speculation)."""

    wall_s: float
    rounds: int


def per_round_ms(short: Timed, long: Timed) -> float | None:
    """The long request's wall less the short one's, in ms over the rounds between; None when
    the long one had no more rounds."""
    rounds = long.rounds - short.rounds
    return (long.wall_s - short.wall_s) * 1e3 / rounds if rounds > 0 else None


def gpu_busy_us(trace: Path) -> float:
    """Microseconds with at least one GPU event running, in a Chrome trace (gzipped or not)."""
    opener = gzip.open if trace.suffix == ".gz" else open
    with opener(trace, "rt", encoding="utf-8") as file:
        events = json.load(file)["traceEvents"]
    spans = sorted(
        (e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU_CATEGORIES
    )
    busy, end = 0.0, float("-inf")
    for a, b in spans:
        if a > end:
            busy += b - a
            end = b
        elif b > end:
            busy += b - end
            end = b
    return busy


@dataclass(frozen=True, slots=True)
class HostBoot:
    """One engine boot's round, in ms; `gpu_busy_ms` only where it was profiled (an engine's
    first boot: the same kernels run on every boot)."""

    wall_ms: float | None
    wall_ms_pairs: tuple[float, ...]
    rounds: int
    """Rounds between the short and the long request."""
    gpu_busy_ms: float | None = None
    profiled_wall_ms: float | None = None
    error: str | None = None

    def describe(self) -> str:
        """One progress line."""
        if self.error is not None:
            return f"host time failed: {self.error}"
        busy = f", GPU busy {self.gpu_busy_ms:.3f}" if self.gpu_busy_ms is not None else ""
        return f"wall {_ms(self.wall_ms)} ms a round over {self.rounds} rounds{busy}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "wall_ms_pairs": list(self.wall_ms_pairs)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostBoot:
        return cls(**{**data, "wall_ms_pairs": tuple(data["wall_ms_pairs"])})


@dataclass(frozen=True, slots=True)
class HostTime:
    """An engine's boots, and what they say together."""

    boots: tuple[HostBoot, ...]

    @property
    def walls(self) -> list[float]:
        return [b.wall_ms for b in self.boots if b.wall_ms is not None]

    @property
    def wall_ms(self) -> float | None:
        """The median over boots of each boot's median wall time a round."""
        return statistics.median(self.walls) if self.walls else None

    @property
    def gpu_busy_ms(self) -> float | None:
        """The median of the profiled boots' GPU-busy time a round."""
        busy = [b.gpu_busy_ms for b in self.boots if b.gpu_busy_ms is not None]
        return statistics.median(busy) if busy else None

    @property
    def idle_ms(self) -> float | None:
        """What the GPU waits a round: the median wall less the GPU's busy time."""
        wall, busy = self.wall_ms, self.gpu_busy_ms
        return wall - busy if wall is not None and busy is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall_ms": self.wall_ms,
            "wall_ms_boots": self.walls,
            "gpu_busy_ms": self.gpu_busy_ms,
            "idle_ms": self.idle_ms,
            "boots": [b.to_dict() for b in self.boots],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostTime:
        return cls(tuple(HostBoot.from_dict(b) for b in data["boots"]))


def spread(values: Sequence[float]) -> str:
    """`median (min-max)` of `values` in ms, or the one value."""
    if not values:
        return "—"
    middle = statistics.median(values)
    if len(values) == 1:
        return f"{middle:.3f}"
    return f"{middle:.3f} ({min(values):.3f}-{max(values):.3f})"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"
