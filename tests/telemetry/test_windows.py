"""Percentiles, rolling windows and the live rate of a streamed reply."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.telemetry import LiveRate, RollingWindow, percentile

FAST = settings(max_examples=60, deadline=None)
finite = st.floats(-1e9, 1e9, allow_nan=False)


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3.0], 50, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),  # mean of the middle two
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([4.0, 1.0, 3.0, 2.0], 25, 1.75),  # rank 0.75 between 1 and 2
        ([10.0, 20.0, 30.0, 40.0, 50.0], 95, 48.0),  # rank 3.8: 40 + 0.8 * 10
        ([0.0, 10.0], 95, 9.5),
    ],
)
def test_percentile_hand_computed(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    with pytest.raises(ValueError):
        percentile([1.0], -1)


@FAST
@given(values=st.lists(finite, min_size=1, max_size=40), q1=st.floats(0, 100), q2=st.floats(0, 100))
def test_percentile_monotone_in_q_and_bounded(values: list[float], q1: float, q2: float) -> None:
    low, high = sorted((q1, q2))
    p_low, p_high = percentile(values, low), percentile(values, high)
    assert p_low <= p_high
    assert min(values) <= p_low
    assert p_high <= max(values)


def test_rolling_window_mean_of_the_last_values() -> None:
    window = RollingWindow(4)
    assert window.mean is None
    for value in [1.0, 2.0, 3.0, 4.0, 5.0]:  # 1.0 falls out
        window.push(value)
    assert len(window) == 4
    assert window.mean == pytest.approx(3.5)


def test_rolling_window_rejects_zero_size() -> None:
    with pytest.raises(ValueError):
        RollingWindow(0)


@FAST
@given(size=st.integers(1, 20), values=st.lists(finite, max_size=60))
def test_rolling_window_never_exceeds_size(size: int, values: list[float]) -> None:
    window = RollingWindow(size)
    for value in values:
        window.push(value)
        assert len(window) <= size
    if values:
        assert window.mean == pytest.approx(math.fsum(values[-size:]) / len(values[-size:]))


def test_live_rate_hand_computed() -> None:
    live = LiveRate(window_s=0.25)
    assert live.recent_tps is None and live.average_tps is None
    live.observe(1.0, 1)  # prefill chunk
    assert live.steps == 0 and live.tokens_per_step is None
    for i, tokens in enumerate([4, 7, 8, 12], start=1):
        live.observe(1.0 + 0.1 * i, tokens)
    snap = live.snapshot()
    assert snap.tokens == 12
    assert snap.steps == 4
    assert snap.elapsed_s == pytest.approx(0.4)
    assert snap.average_tps == pytest.approx(11 / 0.4)
    assert snap.tokens_per_step == pytest.approx(11 / 4)
    assert snap.recent_tokens_per_step == pytest.approx((3 + 3 + 1 + 4) / 4)
    # Window 0.25 s at t=1.4 keeps the sample at 1.1 (newest at or before 1.15) as reference.
    assert snap.recent_tps == pytest.approx((12 - 4) / 0.3)


def test_live_rate_skips_chunks_without_new_tokens() -> None:
    live = LiveRate()
    live.observe(0.0, 1)
    live.observe(0.1, 3)
    live.observe(0.2, 3)
    assert live.steps == 1
    assert live.tokens_per_step == pytest.approx(2.0)


def test_live_rate_rejects_going_backwards() -> None:
    live = LiveRate()
    live.observe(1.0, 5)
    with pytest.raises(ValueError):
        live.observe(0.9, 6)
    with pytest.raises(ValueError):
        live.observe(1.1, 4)


@FAST
@given(
    start=st.floats(0.0, 1e4),
    interval=st.floats(0.001, 0.5),
    per_chunk=st.integers(1, 8),
    first=st.integers(1, 4),
    chunks=st.integers(2, 200),
    window=st.floats(0.01, 3.0),
)
def test_evenly_spaced_chunks_give_the_true_rate_and_step_size(
    start: float, interval: float, per_chunk: int, first: int, chunks: int, window: float
) -> None:
    live = LiveRate(window_s=window)
    for i in range(chunks):
        live.observe(start + i * interval, first + i * per_chunk)
    true_rate = per_chunk / interval
    assert live.average_tps == pytest.approx(true_rate, rel=1e-6)
    assert live.recent_tps == pytest.approx(true_rate, rel=1e-6)
    assert live.tokens_per_step == per_chunk
    assert live.recent_tokens_per_step == per_chunk
    assert live.steps == chunks - 1


@FAST
@given(before=st.integers(2, 100), window=st.floats(0.01, 0.5))
def test_recent_rate_forgets_what_left_the_window(before: int, window: float) -> None:
    live = LiveRate(window_s=window)
    tokens = 0
    for i in range(before):  # 8 tokens every 10 ms
        tokens += 8
        live.observe(i * 0.01, tokens)
    t = (before - 1) * 0.01
    for _ in range(int(window / 0.01) + 2):  # then 2 tokens every 10 ms, past the window
        t += 0.01
        tokens += 2
        live.observe(t, tokens)
    assert live.recent_tps == pytest.approx(200.0, rel=1e-6)
    assert live.average_tps is not None and live.average_tps > 200.0
