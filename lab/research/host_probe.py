"""The scheduler side of lab/scripts/gpu_host_time.py: the host pin forced on, and the
scheduler's waits on the GPU counted (runs inside SGLang's scheduler process).

`run_scheduler_process` is the engine's scheduler entry: it installs the probe, then runs the
known-answer entry of the GPU tests. Environment (set before the engine starts):
- LING_HOST_PIN=on: `decide_needs_cpu_seq_lens` answers True whatever the backends declare,
  so the FutureMap synchronizes on every verify. Sound for any backend: it is SGLang's path
  for a backend that declares nothing (the CPU mirror is filled, whether read or not);
- LING_HOST_STATS=FILE: the counters, written there (atomically) every `WRITE_EVERY_S`;
- LING_HOST_OFF=a,b: ling-chat's host levers (app/levers/host, lab/research/host_time.py's
  HOST_LEVERS) whose patches this engine leaves out, to measure each against the engine with
  all (their proof lines fail: the boot prints them and goes on).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

PIN_ENV: Final = "LING_HOST_PIN"
STATS_ENV: Final = "LING_HOST_STATS"
OFF_ENV: Final = "LING_HOST_OFF"
WRITE_EVERY_S: Final = 0.05


@dataclass(slots=True)
class HostStats:
    """What the scheduler did since it started: cumulative, read as differences."""

    declared_pin: bool | None = None
    """SGLang's own decision: any backend of the spec-v2 forward needs CPU seq lens."""
    pin: bool | None = None
    """The decision the FutureMap got (forced on, or SGLang's)."""
    wait_s: float = 0.0
    """Time in explicit waits on the GPU: event, stream and device synchronizes."""
    waits: int = 0
    resolve_s: float = 0.0
    """Time in `FutureMap.resolve_seq_lens_cpu` (the pin's wait, when pinned)."""
    resolves: int = 0
    timed_waits: list[str] = field(default_factory=list)
    """The synchronizes counted in `wait_s` (one that could not be wrapped is missing)."""
    gc_s: float = 0.0
    """Time in the garbage collector's collections (gc.callbacks), every generation."""
    gcs: int = 0

    @classmethod
    def read(cls, path: Path) -> HostStats:
        """The counters last written to `path`."""
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    def write(self, path: Path) -> None:
        """Write the counters to `path` in one step (a reader never sees half a file)."""
        part = path.with_suffix(".part")
        part.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(part, path)


def timed(fn: Callable[..., Any], add: Callable[[float], None]) -> Callable[..., Any]:
    """`fn`, each call's seconds passed to `add`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            add(time.perf_counter() - started)

    return wrapper


def deciding(
    stock: Callable[[Any], bool], stats: HostStats, *, force_pin: bool
) -> Callable[[Any], bool]:
    """SGLang's `decide_needs_cpu_seq_lens`, its answer recorded and, with `force_pin`, True."""

    def decide(attn_backends: Any) -> bool:
        stats.declared_pin = bool(stock(attn_backends))
        stats.pin = stats.declared_pin or force_pin
        return stats.pin

    return decide


def install(stats: HostStats, *, force_pin: bool) -> None:
    """Wrap SGLang's pin decision, its resolve and torch's synchronizes in this process."""
    import torch
    from sglang.srt.managers import overlap_utils, scheduler

    scheduler.decide_needs_cpu_seq_lens = deciding(
        scheduler.decide_needs_cpu_seq_lens, stats, force_pin=force_pin
    )

    def add_wait(seconds: float) -> None:
        stats.wait_s += seconds
        stats.waits += 1

    def add_resolve(seconds: float) -> None:
        stats.resolve_s += seconds
        stats.resolves += 1

    future_map = overlap_utils.FutureMap
    future_map.resolve_seq_lens_cpu = timed(future_map.resolve_seq_lens_cpu, add_resolve)
    for owner, name in (
        (torch.cuda.Event, "synchronize"),
        (torch.cuda.Stream, "synchronize"),
        (torch.cuda, "synchronize"),
    ):
        try:
            setattr(owner, name, timed(getattr(owner, name), add_wait))
        except (AttributeError, TypeError):  # a C type's method: its waits go uncounted
            continue
        stats.timed_waits.append(f"{owner.__name__}.{name}")


def count_collections(stats: HostStats) -> None:
    """Add each garbage collection's seconds to `stats` (gc.callbacks)."""
    import gc

    started: list[float] = []

    def callback(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            stats.gc_s += time.perf_counter() - started.pop()
            stats.gcs += 1

    gc.callbacks.append(callback)


def without(plan: Any, off: str) -> Any:
    """`plan` with the patches of the levers named in `off` (comma-separated) left out."""
    import dataclasses

    from app.levers.profiles import BY_NAME

    dropped = {BY_NAME[lever].patch for lever in off.split(",") if lever}
    return dataclasses.replace(plan, patches=tuple(p for p in plan.patches if p not in dropped))


def keep_writing(stats: HostStats, path: Path) -> None:
    """Write `stats` to `path` now and every `WRITE_EVERY_S` from a daemon thread."""
    stats.write(path)

    def loop() -> None:
        while True:
            time.sleep(WRITE_EVERY_S)
            stats.write(path)

    threading.Thread(target=loop, name="ling-host-stats", daemon=True).start()


def run_scheduler_process(*args: Any, **kwargs: Any) -> None:
    """The known-answer scheduler entry, the probe installed right after ling-chat's patches
    (before SGLang's scheduler module is imported, as the product's entry orders it)."""
    from app.backend.engine import patches
    from tests.gpu import known_answer

    stats = HostStats()
    ling_install = patches.install

    def install_then_probe(plan: Any) -> None:
        ling_install(without(plan, os.environ.get(OFF_ENV, "")))
        install(stats, force_pin=os.environ.get(PIN_ENV) == "on")
        count_collections(stats)
        if path := os.environ.get(STATS_ENV):
            keep_writing(stats, Path(path))

    patches.install = install_then_probe
    known_answer.run_scheduler_process(*args, **kwargs)
