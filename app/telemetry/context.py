"""Speed against context length: how decoding slows as a conversation grows.

A reply is placed by the context its decode ran on: its prompt tokens. Context buckets
double from 1K to 128K tokens, and each bucket is pooled the way a session is
(`summarize_session`), so a long reply weighs more than a short one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from app.telemetry.metrics import ReplyStats
from app.telemetry.session import SessionSummary, summarize_session

CONTEXT_EDGES: Final = tuple(1024 * 2**k for k in range(8))
"""Bucket boundaries in prompt tokens: 1K, 2K, 4K, ... 128K."""


@dataclass(frozen=True, slots=True)
class ContextBucket:
    """The replies whose prompt held from `low` to under `high` tokens, pooled."""

    low: int
    high: int | None
    """None for the last bucket, which has no upper bound."""
    summary: SessionSummary

    @property
    def label(self) -> str:
        """E.g. `<1K`, `2K-4K`, `128K+`."""
        if self.low == 0:
            return f"<{_k(self.high or 0)}"
        if self.high is None:
            return f"{_k(self.low)}+"
        return f"{_k(self.low)}-{_k(self.high)}"


def by_context(replies: Iterable[ReplyStats]) -> list[ContextBucket]:
    """The buckets that hold replies, shortest context first, each pooled."""
    bounds = list(zip((0, *CONTEXT_EDGES), (*CONTEXT_EDGES, None), strict=True))
    groups: dict[int, list[ReplyStats]] = {}
    for reply in replies:
        index = sum(reply.prompt_tokens >= edge for edge in CONTEXT_EDGES)
        groups.setdefault(index, []).append(reply)
    return [
        ContextBucket(*bounds[index], summarize_session(groups[index])) for index in sorted(groups)
    ]


def _k(tokens: int) -> str:
    return f"{tokens // 1024}K"
