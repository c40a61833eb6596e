"""Percentiles and workload summaries, checked against hand-computed values."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.bench.results import RequestRecord
from app.bench.stats import percentile, summarize
from app.telemetry.metrics import reply_stats
from tests.support.bench_doubles import sample


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([7.0], 95, 7.0),
        ([4.0, 1.0, 3.0, 2.0], 50, 2.5),
        ([4.0, 1.0, 3.0, 2.0], 95, 3.85),  # rank 2.85: 3 + 0.85 * (4 - 3)
        ([1.0, 2.0, 3.0], 0, 1.0),
        ([1.0, 2.0, 3.0], 100, 3.0),
    ],
)
def test_percentile_interpolates_linearly(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def _record(rep: int | None, **kwargs: Any) -> RequestRecord:
    s = sample(**kwargs)
    stats = reply_stats(s.started_at, s.arrivals, s.usage, s.ended_at)
    finish = s.finish_reason
    return RequestRecord(rep=rep, index=0, stats=stats, finish_reason=finish)


def test_warmups_are_excluded() -> None:
    records = [
        _record(None, ttft=9.0, tpot=1.0, tokens=3),
        _record(0, ttft=0.5, tpot=0.02, tokens=5),
    ]
    summary = summarize(records, natural_stop=False)
    assert summary.requests == 1
    assert summary.tpot_s == pytest.approx(0.02)
    assert summary.ttft_s == pytest.approx(0.5)
    assert summary.completion_tokens == 5


def test_errors_count_but_give_no_timings_and_grade_as_wrong() -> None:
    ok = _record(0, ttft=0.5, tpot=0.02, tokens=5, finish="stop")
    records = [
        replace(ok, expected="4", correct=True),
        RequestRecord(rep=0, index=1, stats=None, finish_reason=None, error="boom", expected="5"),
    ]
    summary = summarize(records, natural_stop=True)
    assert (summary.requests, summary.errors) == (2, 1)
    assert summary.latency_mean_s == pytest.approx(0.58)
    assert summary.accuracy == 0.5
    assert summary.truncated == 0


def test_truncations_count_only_where_replies_stop_on_their_own() -> None:
    records = [
        _record(0, ttft=0.1, tpot=0.01, tokens=8, finish="length"),
        _record(0, ttft=0.1, tpot=0.01, tokens=4, finish="stop"),
    ]
    assert summarize(records, natural_stop=True).truncated == 1
    assert summarize(records, natural_stop=False).truncated is None


def test_no_speculation_no_accuracy_no_accept_length() -> None:
    summary = summarize([_record(0, ttft=0.1, tpot=0.01, tokens=8)], natural_stop=False)
    assert summary.accept_length is None
    assert summary.accept_length_median is None
    assert summary.accuracy is None


def test_context_is_prompt_plus_half_the_reply() -> None:
    records = [
        _record(0, ttft=0.1, tpot=0.01, tokens=10, prompt_tokens=100),
        _record(0, ttft=0.1, tpot=0.01, tokens=20, prompt_tokens=200),
    ]
    assert summarize(records, natural_stop=False).context_tokens == pytest.approx(157.5)


def test_empty_workload_has_no_numbers() -> None:
    summary = summarize([], natural_stop=True)
    assert summary.requests == 0
    assert summary.decode_tps is None
    assert summary.latency_mean_s is None
    assert summary.rep_decode_tps == ()


def test_measured_histograms_pool_into_acceptance_by_position() -> None:
    records = [
        _record(None, ttft=9.0, tpot=1.0, tokens=3, verify_rounds=9, histogram=(9,)),
        _record(0, ttft=0.1, tpot=0.01, tokens=10, verify_rounds=4, histogram=(1, 1, 1, 1)),
        _record(1, ttft=0.1, tpot=0.01, tokens=5, verify_rounds=2, histogram=(0, 1, 1)),
    ]
    summary = summarize(records, natural_stop=False)
    positions = summary.accept_positions
    assert positions is not None
    assert positions.histogram == (1, 2, 2, 1)
    assert positions.rates == pytest.approx((5 / 6, 3 / 6, 1 / 6))
    assert positions.accept_length == pytest.approx(15 / 6)  # (10 + 5) tokens / 6 rounds
    assert positions.accept_length == pytest.approx(summary.accept_length)


def test_no_histogram_no_positions() -> None:
    summary = summarize(
        [_record(0, ttft=0.1, tpot=0.01, tokens=8, verify_rounds=3)], natural_stop=False
    )
    assert summary.accept_positions is None
