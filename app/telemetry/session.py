"""Session-wide averages over finished replies, and the per-reply series for sparklines.

Averages are pooled, not means of per-reply ratios: decode tokens/s is all decode tokens
over all decode time, and accept length is all completion tokens over all verify rounds
(SGLang's own definition, applied to the session as one long reply). A 3-token reply
therefore weighs three tokens' worth, not as much as a 2,000-token one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.telemetry.metrics import ReplyStats, pooled_accept_length


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """The numbers the session view shows."""

    replies: int
    completion_tokens: int
    decode_tps: float | None
    """Pooled decode tokens/s: sum of (tokens - 1) over sum of (latency - TTFT)."""
    accept_length: float | None
    """Pooled tokens per verify round over replies that report verify rounds."""
    ttft_s: float | None
    """Mean time to first token."""
    decode_tps_series: tuple[float, ...]
    """Per-reply decode tokens/s, oldest first; replies without one are skipped."""
    accept_length_series: tuple[float, ...]
    """Per-reply accept length, oldest first; replies without one are skipped."""


def summarize_session(replies: Sequence[ReplyStats]) -> SessionSummary:
    """Pool the measurements of a session's replies (oldest first)."""
    decode_tokens = 0
    decode_seconds = 0.0
    for reply in replies:
        if reply.tpot_s is not None and reply.ttft_s is not None:
            decode_tokens += reply.completion_tokens - 1
            decode_seconds += reply.latency_s - reply.ttft_s
    decode_tps = decode_tokens / decode_seconds if decode_seconds > 0 else None
    ttfts = [r.ttft_s for r in replies if r.ttft_s is not None]
    return SessionSummary(
        replies=len(replies),
        completion_tokens=sum(r.completion_tokens for r in replies),
        decode_tps=decode_tps,
        accept_length=pooled_accept_length(replies),
        ttft_s=math.fsum(ttfts) / len(ttfts) if ttfts else None,
        decode_tps_series=tuple(r.decode_tps for r in replies if r.decode_tps is not None),
        accept_length_series=tuple(r.accept_length for r in replies if r.accept_length is not None),
    )
