"""SGLang's scheduler as the levers' fact readers see it: its objects, and the live state of
SGLang, Humming and the FP8 head behind `Sources`.

`Live.of` is built once per collection by app/backend/engine/patches/evidence.py in the
scheduler (`LiveSources` there reads the real state); the CPU tests build it over doubles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

DSPARK_WORKER = "DSparkWorkerV2"
"""SGLang 0.5.23's DSpark speculative worker class."""


@dataclass(frozen=True, slots=True)
class HummingState:
    """Humming's kernels in this process, and the ones prepared during graph capture."""

    runner_cores: int
    kernel_files: Mapping[int, str]
    """Every compiled kernel alive, by id: its cubin file."""
    captured: frozenset[int]
    compiler: str
    cache_dir: str


class Sources(Protocol):
    """What the readers read besides the scheduler's objects."""

    def versions(self) -> dict[str, Any]: ...

    def moe_class(self) -> type[Any]:
        """SGLang's FusedMoE layer class."""

    def humming(self) -> HummingState: ...

    def capture_calls(self) -> Mapping[str, int]:
        """Calls seen while a CUDA graph was being captured, by what was called."""

    def fp8_head_facts(self) -> Mapping[str, Any]:
        """What quantizing the head found (`installed` False when it was not)."""

    def fp8_head_method(self) -> Any:
        """The installed head method's class, with its call counters."""

    def patch(self, name: str) -> Any:
        """The scheduler-side patch `name` (a module of app/backend/engine/patches), whose
        module-level counters a lever's reader reads."""


@dataclass(frozen=True, slots=True)
class Live:
    """The scheduler's models and workers, found once."""

    scheduler: Any
    sources: Sources
    target: Any
    """The target model."""
    spec: Any
    """The speculative worker, or None."""
    draft_worker: Any
    """The speculative worker's draft worker, or None."""
    draft: Any
    """The NEXTN draft model, or None (none, or DSpark's: dense, read by its own facts)."""

    @property
    def dspark(self) -> bool:
        """Whether the speculative worker is DSpark's."""
        return type(self.spec).__name__ == DSPARK_WORKER

    @classmethod
    def of(cls, scheduler: Any, sources: Sources) -> Live:
        """The live objects of `scheduler`."""
        spec = scheduler.draft_worker
        draft_worker = getattr(spec, "draft_worker", None)
        dspark = type(spec).__name__ == DSPARK_WORKER
        draft = draft_worker.draft_runner.model if draft_worker and not dspark else None
        return cls(
            scheduler=scheduler,
            sources=sources,
            target=scheduler.tp_worker.model_runner.model,
            spec=spec,
            draft_worker=draft_worker,
            draft=draft,
        )
