"""The warm-up accept length: two warm-up replies (greedy, then sampled) measure the tokens
a verify round keeps, which must reach the `min_accept_length` setting (a collapsed accept
length makes speculation slower than none). Off without a draft.

The fact is the backend's own measurement (app/backend/warmup.py), added to the scheduler's
facts before the proof judges them; no scheduler reader collects it.
"""

from __future__ import annotations

from typing import Any

from app.core.proof_report import ProofLine, Verdict
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
)
from app.levers.lines import judged

FACT = "warmup_accept_length"
"""The fact the backend adds: tokens per verify round in the warm-up, or None."""
MIN_FACT = "min_accept_length"
"""The floor the start was given (the setting), added beside it."""
DEFAULT_MIN = 1.5
"""The warm-up accept length below which the proof refuses to start (the setting's default)."""
THRESHOLDS = ("speculative_accept_threshold_single", "speculative_accept_threshold_acc")
"""SGLang's relaxed acceptance: below 1.0 (its default) a draft the target did not pick can
be accepted (arg_groups/fields/spec.py)."""
LINE = Line(
    "accept_length",
    "Warm-up accept length",
    "check the draft (MTP) weights and the shared head; a collapsed accept length makes NEXTN "
    "slower than no speculation",
)


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """A relaxed acceptance threshold on a profile with a draft."""
    if profile.speculative and key in THRESHOLDS and value not in (None, 1, 1.0):
        return (
            f"contradicts {LEVER.called} of profile {profile.name}: SGLang would accept drafts "
            "the target did not pick (1.0, its default, verifies exactly)"
        )
    return None


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The measured accept length against the floor."""
    if not profile.speculative:
        return (ProofLine(LINE.key, LINE.title, Verdict.OFF, "no speculation"),)
    measured, minimum = facts.get(FACT), float(facts.get(MIN_FACT, DEFAULT_MIN))
    if measured is None:
        return (judged(LINE, False, "no accept length was measured in the warm-up"),)
    return (
        judged(
            LINE,
            measured >= minimum,
            f"{measured:.2f} tokens per verify round in the warm-up (needs >= {minimum:.2f})",
        ),
    )


LEVER = Lever(
    name="accept_length",
    called="the warm-up accept length",
    called_off="the warm-up accept length",
    lines=(LINE,),
    args=no_args,
    args_why="none: a check of the warm-up",
    free=frozenset(),
    refuse=refuse,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="a measurement of the running engine, on any GPU"),
    patch=None,
    facts={},
    reads=(FACT,),
    judge=judge,
    bytes=ByteTerm(
        why="a check: it changes no byte (the byte model takes accept lengths as given)"
    ),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
