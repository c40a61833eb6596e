"""Detect speculative decoding that runs but accepts nothing (accept length near 1.0).

A collapsed draft costs a verify round per token and so runs slower than no speculative
decoding at all; on Ling-3.0-flash the known cause is a draft head that does not share
the target's FP8 LM head (about 24 tok/s instead of 50+ on DGX Spark).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from app.telemetry.metrics import ReplyStats

COLLAPSE_ACCEPT_LENGTH: Final = 1.2
"""Pooled accept length at or below which speculative decoding counts as collapsed.

Healthy NEXTN with 3 draft steps reads 2.3-3.9 on Ling-3.0-flash; a draft that is always
rejected reads 1.0 (plus SGLang's prefill token, e.g. 33 / 32 = 1.03)."""

COLLAPSE_WINDOW_REPLIES: Final = 3
"""How many of the latest replies are pooled into one accept length."""

MIN_VERIFY_ROUNDS: Final = 32
"""Verify rounds the window needs before it is judged, so a 3-token reply cannot flag."""


class SpecHealth(StrEnum):
    """The state of speculative decoding as the replies show it."""

    OFF = "off"
    """Speculative decoding is not meant to be on: nothing to judge."""
    WARMING = "warming"
    """Too few verify rounds yet to judge."""
    OK = "ok"
    COLLAPSED = "collapsed"
    """Accept length at or below `COLLAPSE_ACCEPT_LENGTH`."""
    NO_STATS = "no-stats"
    """Meant to be on, yet replies long enough to tell report no verify rounds."""


@dataclass(frozen=True, slots=True)
class CollapseVerdict:
    """What the detector concluded, with the numbers behind it."""

    status: SpecHealth
    message: str
    """One line fit to show the user."""
    accept_length: float | None = None
    """Pooled tokens per verify round over the window."""
    verify_rounds: int = 0
    """Verify rounds the verdict rests on."""

    @property
    def flagged(self) -> bool:
        """True when the user should be warned."""
        return self.status in (SpecHealth.COLLAPSED, SpecHealth.NO_STATS)


def judge_accept_length(
    tokens: int,
    verify_rounds: int,
    *,
    speculative: bool,
    threshold: float = COLLAPSE_ACCEPT_LENGTH,
    min_rounds: int = MIN_VERIFY_ROUNDS,
) -> CollapseVerdict:
    """Judge pooled counts: `tokens` committed over `verify_rounds` verify rounds.

    With no verify rounds at all, `tokens` decides whether that is conclusive
    (`NO_STATS` from `min_rounds` tokens on) or too early to tell.
    """
    if not speculative:
        return CollapseVerdict(SpecHealth.OFF, "Speculative decoding is off.")
    if verify_rounds <= 0:
        if tokens >= min_rounds:
            return CollapseVerdict(
                SpecHealth.NO_STATS,
                f"Speculative decoding should be on, but {tokens} tokens came with no "
                "verify rounds: it is not engaged.",
            )
        return CollapseVerdict(SpecHealth.WARMING, "Not enough tokens yet to judge drafts.")
    accept = tokens / verify_rounds
    if verify_rounds < min_rounds:
        return CollapseVerdict(
            SpecHealth.WARMING,
            f"Accept length {accept:.2f} over only {verify_rounds} verify rounds.",
            accept,
            verify_rounds,
        )
    if accept <= threshold:
        return CollapseVerdict(
            SpecHealth.COLLAPSED,
            f"Speculative decoding has collapsed: {accept:.2f} tokens per verify round over "
            f"{verify_rounds} rounds, so almost every draft is rejected and decoding is "
            "slower than without it. Check that the draft shares the target's LM head.",
            accept,
            verify_rounds,
        )
    return CollapseVerdict(
        SpecHealth.OK,
        f"Accept length {accept:.2f} over {verify_rounds} verify rounds.",
        accept,
        verify_rounds,
    )


def check_collapse(
    replies: Sequence[ReplyStats],
    *,
    speculative: bool,
    window: int = COLLAPSE_WINDOW_REPLIES,
    threshold: float = COLLAPSE_ACCEPT_LENGTH,
    min_rounds: int = MIN_VERIFY_ROUNDS,
) -> CollapseVerdict:
    """Judge the last `window` replies (oldest first), pooled like SGLang's accept length.

    Args:
        replies: The session's replies so far.
        speculative: Whether speculative decoding is meant to be on
            (`BackendInfo.speculative`); when False the verdict is always `OFF`.
        window: How many of the latest replies to pool.
        threshold: Accept length at or below which the window counts as collapsed.
        min_rounds: Verify rounds needed before judging.
    """
    recent = replies[-window:] if window > 0 else ()
    with_stats = [r for r in recent if r.verify_rounds]
    if with_stats:
        tokens = sum(r.completion_tokens for r in with_stats)
        rounds = sum(r.verify_rounds or 0 for r in with_stats)
    else:
        tokens = sum(r.completion_tokens for r in recent)
        rounds = 0
    return judge_accept_length(
        tokens, rounds, speculative=speculative, threshold=threshold, min_rounds=min_rounds
    )
