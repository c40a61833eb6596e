"""Speed against context: replies bucketed by prompt length, each bucket pooled."""

from __future__ import annotations

import pytest

from app.core.reply_usage import ReplyUsage
from app.telemetry import ReplyStats, reply_stats
from app.telemetry.context import by_context


def _reply(prompt_tokens: int, decode_s: float, completion: int = 101) -> ReplyStats:
    usage = ReplyUsage(completion_tokens=completion, prompt_tokens=prompt_tokens, verify_rounds=25)
    return reply_stats(0.0, [0.5], usage, 0.5 + decode_s)


def test_replies_fall_into_doubling_context_buckets_with_their_edges() -> None:
    buckets = by_context(
        [_reply(1023, 1.0), _reply(1024, 2.0), _reply(2047, 2.0), _reply(40_000, 4.0)]
    )
    assert [(b.label, b.summary.replies) for b in buckets] == [
        ("<1K", 1),
        ("1K-2K", 2),
        ("32K-64K", 1),
    ]
    assert [b.summary.decode_tps for b in buckets] == pytest.approx([100.0, 50.0, 25.0])
    assert buckets[0].summary.accept_length == pytest.approx(101 / 25)


def test_the_last_bucket_has_no_upper_bound_and_empty_input_gives_none() -> None:
    (bucket,) = by_context([_reply(500_000, 10.0)])
    assert (bucket.label, bucket.low, bucket.high) == ("128K+", 131_072, None)
    assert by_context([]) == []
