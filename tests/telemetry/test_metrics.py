"""reply_stats and the metric functions against hand-computed values and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.reply_usage import ReplyUsage
from app.telemetry import (
    ReplyStats,
    decode_tokens_per_second,
    reply_stats,
    time_per_output_token,
)

FAST = settings(max_examples=60, deadline=None)


def test_reply_stats_hand_computed() -> None:
    arrivals = [0.5 + 0.1 * i for i in range(21)]
    usage = ReplyUsage(
        completion_tokens=21,
        prompt_tokens=12,
        cached_tokens=8,
        verify_rounds=7,
        correct_drafts=14,
        proposed_drafts=21,
        accept_histogram=(1, 2, 3, 1),
    )
    stats = reply_stats(0.0, arrivals, usage, 2.5)
    assert stats.prompt_tokens == 12
    assert stats.completion_tokens == 21
    assert stats.ttft_s == pytest.approx(0.5)
    assert stats.latency_s == pytest.approx(2.5)
    assert stats.tpot_s == pytest.approx(0.1)  # (2.5 - 0.5) / (21 - 1)
    assert stats.decode_tps == pytest.approx(10.0)
    assert stats.accept_length == pytest.approx(3.0)  # 21 / 7
    assert stats.accept_rate == pytest.approx(2 / 3)
    assert stats.verify_rounds == 7
    assert stats.accept_histogram == (1, 2, 3, 1)
    assert stats.cached_tokens == 8


def test_reply_stats_without_speculative_decoding() -> None:
    stats = reply_stats(10.0, [10.2, 10.3], ReplyUsage(completion_tokens=5), 10.6)
    assert stats.ttft_s == pytest.approx(0.2)
    assert stats.tpot_s == pytest.approx(0.1)  # (0.6 - 0.2) / 4
    assert stats.accept_length is None
    assert stats.accept_rate is None
    assert stats.verify_rounds is None
    assert stats.accept_histogram is None
    assert stats.cached_tokens is None


def test_reply_stats_with_no_text_has_no_ttft_or_tpot() -> None:
    stats = reply_stats(1.0, [], ReplyUsage(completion_tokens=0), 1.5)
    assert stats.ttft_s is None
    assert stats.tpot_s is None
    assert stats.decode_tps is None
    assert stats.latency_s == pytest.approx(0.5)


def test_single_token_reply_has_no_tpot() -> None:
    assert time_per_output_token(1.0, 0.5, 1) is None
    assert time_per_output_token(0.5, 0.5, 10) is None
    assert decode_tokens_per_second(None) is None
    assert decode_tokens_per_second(0.0) is None


def test_accept_length_and_rate_need_a_denominator() -> None:
    assert ReplyUsage(completion_tokens=10).accept_length is None
    assert ReplyUsage(correct_drafts=3).accept_rate is None
    assert ReplyUsage(completion_tokens=10, verify_rounds=4).accept_length == pytest.approx(2.5)
    assert ReplyUsage(correct_drafts=3, proposed_drafts=4).accept_rate == pytest.approx(0.75)


def test_to_dict_is_json_ready() -> None:
    stats = ReplyStats(1, 2, 0.1, 0.3, 0.2, 5.0, accept_histogram=(1, 2), extra={"k": 1})
    data = stats.to_dict()
    assert data["accept_histogram"] == [1, 2]
    assert data["extra"] == {"k": 1}
    assert data["tpot_s"] == 0.2


@FAST
@given(
    ttft=st.floats(0.001, 10.0),
    decode=st.floats(0.001, 100.0),
    completion=st.integers(2, 100_000),
)
def test_tpot_times_intervals_plus_ttft_is_latency(
    ttft: float, decode: float, completion: int
) -> None:
    latency = ttft + decode
    tpot = time_per_output_token(latency, ttft, completion)
    assert tpot is not None
    assert tpot * (completion - 1) + ttft == pytest.approx(latency, rel=1e-9)
    tps = decode_tokens_per_second(tpot)
    assert tps is not None
    assert tps * tpot == pytest.approx(1.0)


@FAST
@given(
    start=st.floats(0.0, 1e4),
    gaps=st.lists(st.floats(0.001, 1.0), min_size=1, max_size=50),
    tail=st.floats(0.001, 1.0),
    extra_tokens=st.integers(1, 5000),
)
def test_reply_stats_tpot_covers_the_whole_decode(
    start: float, gaps: list[float], tail: float, extra_tokens: int
) -> None:
    arrivals = [start + sum(gaps[: i + 1]) for i in range(len(gaps))]
    ended = arrivals[-1] + tail
    completion = 1 + extra_tokens
    stats = reply_stats(start, arrivals, ReplyUsage(completion_tokens=completion), ended)
    assert stats.ttft_s is not None and stats.tpot_s is not None
    assert stats.tpot_s * (completion - 1) + stats.ttft_s == pytest.approx(stats.latency_s)


@FAST
@given(verify=st.integers(1, 10_000), extra=st.integers(0, 40_000))
def test_accept_length_at_least_one_when_completion_covers_verifies(
    verify: int, extra: int
) -> None:
    value = ReplyUsage(completion_tokens=verify + extra, verify_rounds=verify).accept_length
    assert value is not None
    assert value >= 1.0
