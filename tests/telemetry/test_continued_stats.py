"""One reply's figures from its parts (a reply and its continuation), worked by hand; and the
usage of a reply's requests (thinking, then answer) summed."""

from __future__ import annotations

import pytest

from app.core.reply_usage import ReplyUsage
from app.telemetry import ReplyStats, continued_stats, reply_stats


def part(start: float, first: float, end: float, tokens: int, rounds: int, rate: float):
    usage = ReplyUsage(
        completion_tokens=tokens,
        prompt_tokens=10,
        verify_rounds=rounds,
        correct_drafts=int(rate * rounds * 3),
        proposed_drafts=rounds * 3,
        accept_histogram=(1, rounds - 1),
    )
    return reply_stats(start, [first], usage, end)


def test_a_continued_reply_sums_tokens_time_and_rounds() -> None:
    # 11 tokens: first at 0.5 s, the other 10 in 1.0 s; then 21 tokens: 20 in 1.0 s.
    earlier = part(0.0, 0.5, 1.5, 11, 4, 0.5)
    later = part(10.0, 10.25, 11.25, 21, 6, 1.0)
    joined = continued_stats(earlier, later)
    assert joined.completion_tokens == 32
    assert joined.latency_s == pytest.approx(1.5 + 1.25)
    assert joined.ttft_s == pytest.approx(0.5)
    assert joined.tpot_s == pytest.approx(2.0 / 30)  # decode time over tokens decoded
    assert joined.decode_tps == pytest.approx(15.0)
    assert joined.verify_rounds == 10
    assert joined.accept_length == pytest.approx(32 / 10)
    assert joined.accept_rate == pytest.approx((0.5 * 4 + 1.0 * 6) / 10)
    assert joined.accept_histogram == (2, 8)
    assert joined.prompt_tokens == 10


def test_a_part_without_speculation_leaves_accept_length_to_the_parts_that_have_it() -> None:
    spec = part(0.0, 0.5, 1.5, 11, 4, 0.5)
    plain = ReplyStats(10, 5, 0.1, 0.5, 0.1, 10.0)
    joined = continued_stats(spec, plain)
    assert joined.accept_length == pytest.approx(11 / 4)
    assert joined.verify_rounds == 4 and joined.completion_tokens == 16


def test_a_reply_s_requests_sum_their_usage() -> None:
    thinking = ReplyUsage(10, 50, 40, 3, 6, 9, (0, 1, 2))
    answer = ReplyUsage(20, 61, 60, 5, 12, 15, (1, 4))
    both = thinking.then(answer)
    assert both == ReplyUsage(30, 50, 40, 8, 18, 24, (1, 5, 2))
    assert both.accept_length == pytest.approx(30 / 8)
    assert ReplyUsage(4).then(ReplyUsage(3)).accept_histogram is None
