"""What runs inside SGLang's spawned scheduler and detokenizer processes.

SGLang starts its scheduler with multiprocessing *spawn*, so changes made in the app
process never reach the model. `LingEngine` (app/backend/engine/engine.py) and `ling-chat
serve` name the two entry functions below instead of SGLang's own; they install
ling-chat's model changes in the child, then call SGLang's stock entry:

- fp8_head: quantize the target's BF16 LM head to FP8 after loading, before capture;
- sharing: the NEXTN draft takes the target's whole LM-head module;
- evidence: record what the running model really is, sent back with the init info
  (dspark: the DSpark draft's part of it; replayssm: the KDA verify's);
- kernel_load: a cached Humming kernel CUDA cannot load names its file and cache;
- load_watch: the weight load's bytes and stages, written for the start screen;
- draft_shards: the NEXTN draft reads only the shards holding its layer.

The plan (which changes to make) travels in the `LING_CHAT_PATCH_PLAN` environment
variable, which spawned children inherit.
"""

from __future__ import annotations

import json
import os
import re
import signal
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.core.profiles import Levers

PLAN_ENV = "LING_CHAT_PATCH_PLAN"
REFUSAL = re.compile(r"LING_CHAT_REFUSED\[(\w+)\] (.+?) LING_CHAT_END")
"""Finds a refusal raised in the scheduler, in the engine's error or in the log."""


def refusal(key: str, message: str) -> RuntimeError:
    """An error that stops the scheduler and reaches the app as a failed proof line."""
    return RuntimeError(f"LING_CHAT_REFUSED[{key}] {message} LING_CHAT_END")


@dataclass(frozen=True, slots=True)
class PatchPlan:
    """Which model changes the child installs."""

    fp8_head: bool = True
    log_file: str | None = None
    """Child stdout/stderr go here (None: leave them alone)."""
    min_head_speedup: float = 1.2
    """The FP8 head must beat the BF16 head by this factor in the load-time timing."""
    dspark: bool = False
    """Record the DSpark draft's evidence (app/backend/engine/patches/dspark.py)."""
    replayssm: bool = False
    """Count the KDA ReplaySSM commits (app/backend/engine/patches/replayssm.py)."""
    progress_file: str | None = None
    """Where the load's progress goes (app/backend/engine/load_progress.py; None: nowhere)."""
    draft_own_shards: bool = True
    """The NEXTN draft reads only its own shards (draft_shards.py); off: SGLang's second
    reading of the whole checkpoint, for the load benchmark's side-by-side rows."""

    @classmethod
    def for_levers(
        cls, levers: Levers, log_file: str, progress_file: str | None = None
    ) -> PatchPlan:
        """The changes a profile's levers need, the child's output going to `log_file`."""
        return cls(
            fp8_head=levers.fp8_head,
            dspark=levers.dspark,
            replayssm=levers.kda_replayssm,
            log_file=log_file,
            progress_file=progress_file,
        )

    def to_env(self) -> str:
        """The JSON value of LING_CHAT_PATCH_PLAN."""
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> PatchPlan:
        """The plan the parent set; the product default when unset."""
        raw = os.environ.get(PLAN_ENV)
        return cls(**json.loads(raw)) if raw else cls()


def install(plan: PatchPlan) -> None:
    """Install every model change of the plan into this (child) process."""
    from app.backend.engine.patches import (
        draft_shards,
        dspark,
        evidence,
        fp8_head,
        kernel_load,
        load_watch,
        replayssm,
        sharing,
    )

    evidence.install()
    kernel_load.install()
    sharing.install()
    if plan.draft_own_shards:
        draft_shards.install()
    if plan.dspark:
        dspark.install()
    if plan.replayssm:
        replayssm.install()
    if plan.fp8_head:
        fp8_head.install(plan.min_head_speedup)
    if plan.progress_file:  # after the FP8 head: its time counts as the head's
        load_watch.install(plan.progress_file, fp8_head=plan.fp8_head)


def redirect_output(log_file: str | None) -> None:
    """Point this process's fds 1 and 2 at the log file (tqdm, Triton, NVRTC noise)."""
    if not log_file:
        return
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def ignore_hang_up() -> None:
    """Leave the terminal's hang-up (its window closed) to the app, which stores the reply in
    flight and then stops this process; SGLang's PR_SET_PDEATHSIG kills it if the app dies."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def run_scheduler_process(*args: Any, **kwargs: Any) -> None:
    """SGLang's scheduler entry, with ling-chat's model changes installed first."""
    plan = PatchPlan.from_env()
    redirect_output(plan.log_file)
    ignore_hang_up()
    install(plan)
    from sglang.srt.managers.scheduler import run_scheduler_process as stock

    stock(*args, **kwargs)


def run_detokenizer_process(*args: Any, **kwargs: Any) -> None:
    """SGLang's detokenizer entry, with its output sent to the log file."""
    redirect_output(PatchPlan.from_env().log_file)
    ignore_hang_up()
    from sglang.srt.managers.detokenizer_manager import run_detokenizer_process as stock

    stock(*args, **kwargs)
