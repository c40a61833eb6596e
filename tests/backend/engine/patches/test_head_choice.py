"""The FP8 head kernel choice: pure rules over load-time timings."""

import math

import pytest

from app.backend.engine.patches.head_choice import floor_share, floor_us, pick, total_us


def test_the_fastest_over_both_token_counts_wins():
    timings = {
        "cutlass": {"1": 150.0, "4": 152.0},
        "scaled-mm": {"1": 140.0, "4": 141.0},
        "triton-gemv[a]": {"1": 92.0, "4": 95.0},
        "triton-gemv[b]": {"1": 90.0, "4": 99.0},
    }
    assert pick(timings) == "triton-gemv[a]"


def test_a_kernel_fast_at_one_m_but_slow_at_the_other_loses_on_the_sum():
    timings = {"a": {"1": 50.0, "4": 400.0}, "b": {"1": 120.0, "4": 125.0}}
    assert pick(timings) == "b"


@pytest.mark.parametrize(
    "broken",
    [
        {"1": "RuntimeError: not supported", "4": 10.0},
        {"1": 10.0},
        {"1": math.nan, "4": 10.0},
        {"1": math.inf, "4": 10.0},
        {"1": 0.0, "4": 10.0},
        {"1": True, "4": 10.0},
    ],
)
def test_a_kernel_that_failed_or_gave_no_time_is_never_picked(broken):
    assert total_us(broken) is None
    assert pick({"broken": broken, "slow": {"1": 500.0, "4": 500.0}}) == "slow"


def test_nothing_ran_means_no_choice():
    assert pick({"a": {"1": "boom", "4": "boom"}}) is None
    assert pick({}) is None


def test_ties_go_to_the_first_listed():
    assert pick({"cutlass": {"1": 1.0, "4": 1.0}, "other": {"1": 1.0, "4": 1.0}}) == "cutlass"


def test_the_byte_floor_of_the_fp8_head():
    fp8_bytes = 157184 * 2560 + 157184 * 4
    assert floor_us(fp8_bytes, 4800.0) == pytest.approx(83.96, abs=0.01)
    assert floor_share(84.0, 92.0) == pytest.approx(0.913, abs=1e-3)
    assert floor_share(84.0, 0.0) == 0.0
