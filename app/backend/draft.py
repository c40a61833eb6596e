"""The draft depth in use, read from the running scheduler's facts or SGLang's server args.

Pure functions over JSON that may come from a hostile server or a shared trace: a value
that is not a whole number in 1..MAX_COUNT leaves the shape unknown (None), never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from app.backend.protocol import DraftShape
from app.core.reply_usage import check_count

MAX_COUNT: Final = 999
"""The most steps or tokens believed: no speculative setting comes near it, and the speed
panel's row has room for three digits."""
DSPARK: Final = "DSPARK"


def count(value: object) -> int | None:
    """`value` when it is a count (`check_count`) in 1..MAX_COUNT, else None."""
    try:
        found = check_count(value, "a draft count")
    except ValueError:
        return None
    return found if 0 < found <= MAX_COUNT else None


def shape(steps: object, verify_tokens: object, block: object = None) -> DraftShape | None:
    """A `DraftShape` of these counts, or None when any of them is not a count."""
    step_count, token_count, block_count = count(steps), count(verify_tokens), count(block)
    if step_count is None or token_count is None or (block is not None and block_count is None):
        return None
    return DraftShape(step_count, token_count, block_count)


def draft_in_use(facts: object, args: Mapping[str, Any]) -> DraftShape | None:
    """The shape the scheduler's proof facts report, else the one the server args ask for."""
    return from_facts(facts) or from_args(args)


def from_facts(facts: object) -> DraftShape | None:
    """From `ling_chat_proof` (app/backend/engine/patches/evidence.py): the DSpark worker's gamma
    and verify window, or the NEXTN draft worker's steps and draft tokens."""
    if not isinstance(facts, Mapping):
        return None
    dspark = facts.get("dspark")
    if isinstance(dspark, Mapping) and "gamma" in dspark:
        return shape(1, dspark.get("verify_window"), dspark.get("gamma"))
    spec = facts.get("speculative")
    if isinstance(spec, Mapping):
        return shape(spec.get("num_steps"), spec.get("num_draft_tokens"))
    return None


def from_args(args: Mapping[str, Any]) -> DraftShape | None:
    """From SGLang server args, as passed or as `/server_info` resolved them.

    A DSpark block left to the draft's checkpoint is the verify window less its anchor
    token (SGLang 0.5.23, `arg_groups/speculative_hook.py`: window = gamma + 1).
    """
    if not args.get("speculative_algorithm"):
        return None
    steps = args.get("speculative_num_steps")
    tokens = args.get("speculative_num_draft_tokens")
    if args["speculative_algorithm"] != DSPARK:
        return shape(steps, tokens)
    block = args.get("speculative_dspark_block_size")
    if block is None and (window := count(tokens)) is not None:
        block = window - 1
    return shape(steps, tokens, block)
