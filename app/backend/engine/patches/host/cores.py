"""SGLang's scheduler on the fastest cores, where the CPU's cores differ in speed.

A batch-1 round waits on one Python thread, the scheduler's. The DGX Spark's GB10 has 10
Cortex-X925 and 10 Cortex-A725 cores; a thread left on an A725 runs the round's host work
slower. Each core's speed is read from sysfs, never assumed: `cpu_capacity` (the kernel's
relative capacity, where it has one), else `cpufreq/cpuinfo_max_freq`. Where the cores this
process may use differ (one below SAME_SPEED of the fastest), the scheduler process is pinned
to the fast ones before SGLang starts (its threads inherit it); where they are alike (or sysfs
says nothing) it is left alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan

SYSFS = Path("/sys/devices/system/cpu")
SOURCES = ("cpu_capacity", "cpufreq/cpuinfo_max_freq")
"""Where a core's speed is read, in order of preference."""
SAME_SPEED = 0.9
"""Cores at this share of the fastest core's speed or above count as fast: a server's favoured
cores (a few percent faster turbo) are not a reason to crowd every thread onto them."""
FACTS: dict[str, Any] = {"source": None, "speeds": {}, "allowed": [], "pinned_to": None}
"""What pinning found: the speed source, cores by speed, the cores allowed, the ones chosen."""


def core_speeds(cpus: Iterable[int], root: Path = SYSFS) -> tuple[str | None, dict[int, int]]:
    """The first source every core in `cpus` has a value in, and each core's value."""
    for source in SOURCES:
        speeds = {}
        for cpu in cpus:
            try:
                speeds[cpu] = int((root / f"cpu{cpu}" / source).read_text().strip())
            except (OSError, ValueError):
                break
        else:
            return source, speeds
    return None, {}


def fastest(speeds: dict[int, int]) -> frozenset[int] | None:
    """The fast cores (SAME_SPEED of the fastest or above), or None where every core is fast
    (or none is known)."""
    if not speeds:
        return None
    floor = SAME_SPEED * max(speeds.values())
    fast = frozenset(cpu for cpu, speed in speeds.items() if speed >= floor)
    return fast if len(fast) < len(speeds) else None


def pin(
    root: Path = SYSFS,
    allowed: frozenset[int] | None = None,
    set_affinity: Callable[[int, frozenset[int]], None] = os.sched_setaffinity,
) -> frozenset[int] | None:
    """Pin this process to the fastest of its `allowed` cores where they differ; the cores
    chosen (None: left alone). FACTS records what was read."""
    allowed = frozenset(os.sched_getaffinity(0)) if allowed is None else allowed
    source, speeds = core_speeds(sorted(allowed), root)
    chosen = fastest(speeds)
    FACTS.update(
        source=source,
        speeds={
            str(s): sorted(c for c, v in speeds.items() if v == s) for s in set(speeds.values())
        },
        allowed=sorted(allowed),
        pinned_to=sorted(chosen) if chosen else None,
        same_speed=SAME_SPEED,
    )
    if chosen:
        set_affinity(0, chosen)
    return chosen


def install(plan: PatchPlan) -> None:
    """Pin this process where its cores differ in speed (patches/__init__.py runs this first:
    every thread started after it inherits the cores)."""
    pin()


def collect(affinity: Callable[[int], Iterable[int]] = os.sched_getaffinity) -> dict[str, Any]:
    """The `cores` fact: what pinning read and chose, and the cores the scheduler runs on now."""
    return {**FACTS, "running_on": sorted(affinity(0))}
