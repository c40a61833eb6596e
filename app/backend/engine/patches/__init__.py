"""What runs inside SGLang's spawned scheduler and detokenizer processes.

SGLang starts its scheduler with multiprocessing *spawn*, so changes made in the app
process never reach the model. `LingEngine` (app/backend/engine/engine.py) and `ling-chat
serve` name the two entry functions below instead of SGLang's own; they install
ling-chat's model changes in the child, then call SGLang's stock entry:

- each lever's patch, named by its lever module (app/levers) and installed when the
  profile has the lever: fp8_head (quantize the target's BF16 LM head to FP8 after loading,
  before capture), sharing (the NEXTN draft takes the target's whole LM-head module),
  kernel_load (a cached Humming kernel CUDA cannot load names its file and cache), dspark
  and replayssm (count what their lines judge), and host/ (the scheduler's host time a
  round: the ReplaySSM commit fed the verify's indices, the collector frozen once up, the
  fastest cores);
- evidence: every lever's facts about the running model, sent back with the init info;
- load_watch: the weight load's bytes and stages, written for the start screen;
- draft_shards: the NEXTN draft reads only the shards holding its layer;
- host/log_level: the log level ling-chat asks SGLang for, in force once the scheduler is up.

The plan (which changes to make) crosses the process boundary in an environment variable
(boundary.py), as the refusals come back.
"""

from __future__ import annotations

import importlib
import os
import signal
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan

EARLY = ("host.cores",)
"""Lever patches installed before anything else: the cores pinned before an import starts a
thread (a thread keeps the cores it started on)."""


def install(plan: PatchPlan) -> None:
    """Install every model change of the plan into this (child) process: the early patches,
    the evidence, the log level, the draft's own shards, each other lever's patch, then the
    load's watch (after the FP8 head: its time counts as the head's)."""
    for name in (name for name in plan.patches if name in EARLY):
        importlib.import_module(f"{__name__}.{name}").install(plan)
    from app.backend.engine.patches import draft_shards, evidence, load_watch
    from app.backend.engine.patches.host import log_level

    evidence.install()
    log_level.install()
    if plan.draft_own_shards:
        draft_shards.install()
    for name in (name for name in plan.patches if name not in EARLY):
        importlib.import_module(f"{__name__}.{name}").install(plan)
    if plan.progress_file:
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
