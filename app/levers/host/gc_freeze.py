"""The scheduler's garbage collector frozen once the engine is up (every profile).

After the load and the graph capture the scheduler holds millions of long-lived Python
objects; a full collection walks them all, and one that falls inside a round stalls it. The
lever's patch (app/backend/engine/patches/host/gc_freeze.py) collects once as the scheduler
reports ready and freezes what survived (`gc.freeze()`, as SGLang's `Engine.freeze_gc()`), so
later collections walk only what the rounds make. No setting of SGLang 0.5.23 touches the
scheduler's collector after its start: nothing contradicts it.
"""

from __future__ import annotations

from app.core.proof_report import ProofLine
from app.levers.host import patch_reader
from app.levers.lever import (
    ByteTerm,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    fits_any,
    no_args,
    no_env_refusal,
    no_refusal,
)
from app.levers.lines import error, judged

PATCH = "host.gc_freeze"
LINE = Line(
    "gc_frozen",
    "Scheduler's garbage collector frozen once up",
    "run ling-chat's engine: its scheduler entry freezes the collector as the scheduler "
    "reports ready",
)


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Objects sit in the scheduler's permanent generation."""
    if not profile.has(LEVER):
        return ()
    if err := error(facts, "gc"):
        return (judged(LINE, False, err),)
    gc = facts["gc"]
    return (
        judged(
            LINE,
            gc["freeze_count"] > 0,
            f"{gc['freeze_count']:,} objects frozen in the scheduler (a collection of "
            f"{gc['collect_s']} s first); thresholds {gc['thresholds']}",
        ),
    )


LEVER = Lever(
    name="gc_freeze",
    called="the GC freeze lever",
    called_off="the scheduler's collector walking every object",
    lines=(LINE,),
    args=no_args,
    args_why="none: a scheduler-side patch",
    free=frozenset(),
    refuse=no_refusal,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="Python's collector in SGLang's scheduler, on any GPU"),
    patch=PATCH,
    facts={"gc": patch_reader(PATCH)},
    reads=("gc",),
    judge=judge,
    bytes=ByteTerm(why="host time: the collections inside a round, no byte the model counts"),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
