"""The scheduler's host time a round: the levers that cut what Python does between kernels.

- commit: the KDA ReplaySSM commit fed the step indices the verify already prepared;
- gc_freeze: the garbage collector frozen once the engine is up;
- cores: the scheduler on the fastest cores, where the CPU's cores differ in speed;
- log_level: the log level ling-chat asks SGLang for, in force once the scheduler is up.

Each records its evidence in this process; app/backend/proof/host.py judges it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.backend.engine.patches import PatchPlan


def install(plan: PatchPlan) -> None:
    """The plan's host levers, in the scheduler process before SGLang's scheduler starts."""
    from app.backend.engine.patches.host import commit, cores, gc_freeze, log_level

    if plan.fast_cores:
        cores.pin()  # first: every thread started after it inherits the cores
    log_level.install()
    if plan.gc_freeze:
        gc_freeze.install()
    if plan.prepared_commit:
        commit.install()
