"""Session summary: pooled averages and sparkline series."""

from __future__ import annotations

import pytest

from app.core.reply_usage import ReplyUsage
from app.telemetry import ReplyStats, reply_stats, summarize_session


def _reply(ttft: float, latency: float, completion: int, verify: int = 0) -> ReplyStats:
    usage = ReplyUsage(completion_tokens=completion, verify_rounds=verify)
    return reply_stats(0.0, [ttft], usage, latency)


def test_summary_pools_tokens_and_time() -> None:
    replies = [
        _reply(0.5, 2.5, 21, verify=7),  # 20 decode tokens in 2.0 s, accept 3.0
        _reply(0.2, 1.2, 11, verify=5),  # 10 decode tokens in 1.0 s, accept 2.2
        _reply(0.3, 0.3, 1),  # one token: no TPOT, no verify rounds
    ]
    summary = summarize_session(replies)
    assert summary.replies == 3
    assert summary.completion_tokens == 33
    assert summary.decode_tps == pytest.approx(30 / 3.0)
    assert summary.accept_length == pytest.approx(32 / 12)
    assert summary.ttft_s == pytest.approx((0.5 + 0.2 + 0.3) / 3)
    assert summary.decode_tps_series == pytest.approx((10.0, 10.0))
    assert summary.accept_length_series == pytest.approx((3.0, 2.2))


def test_summary_weighs_long_replies_more_than_a_mean_of_ratios() -> None:
    replies = [_reply(0.1, 10.1, 1001), _reply(0.1, 0.2, 2)]  # 100 and 10 tok/s
    summary = summarize_session(replies)
    assert summary.decode_tps == pytest.approx(1001 / 10.1)  # not (100 + 10) / 2
    assert summary.decode_tps_series == pytest.approx((100.0, 10.0))


def test_empty_session() -> None:
    summary = summarize_session([])
    assert summary.replies == 0
    assert summary.decode_tps is None
    assert summary.accept_length is None
    assert summary.ttft_s is None
    assert summary.decode_tps_series == ()
