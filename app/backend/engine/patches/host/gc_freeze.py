"""The scheduler's garbage collector frozen once the engine is up.

After the model is loaded and every CUDA graph captured, the scheduler process holds millions
of long-lived Python objects (modules, parameters, SGLang's pools and batches' templates). A
full collection walks them all, and one that falls inside a round stalls it. Just before the
scheduler reports ready (`Scheduler.get_init_info`, after the capture), this collects once
and moves every surviving object to the permanent generation (`gc.freeze()`, what SGLang's
`Engine.freeze_gc()` does in each process), so later collections walk only what the rounds
make. The warm-up that follows creates few long-lived objects.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan

FACTS: dict[str, Any] = {"frozen": 0, "collect_s": None}
"""What freezing found in this process: objects frozen, and the collection's seconds."""


def freeze() -> None:
    """Collect, then freeze what survived; the counts recorded in FACTS."""
    started = time.perf_counter()
    gc.collect()
    FACTS["collect_s"] = round(time.perf_counter() - started, 3)
    gc.freeze()
    FACTS["frozen"] = gc.get_freeze_count()


def install(plan: PatchPlan) -> None:
    """Freeze as the scheduler reports ready (ling-chat's evidence, installed after, reads
    the counts then)."""
    from sglang.srt.managers.scheduler import Scheduler

    stock = Scheduler.get_init_info

    def get_init_info(self: Any) -> dict[str, Any]:
        freeze()
        return stock(self)

    Scheduler.get_init_info = get_init_info


def collect() -> dict[str, Any]:
    """The `gc` fact: objects in the permanent generation now, and what freezing recorded."""
    return {**FACTS, "freeze_count": gc.get_freeze_count(), "thresholds": list(gc.get_threshold())}
