"""Comparing two runs: changes per profile, regressions past the threshold flagged."""

from __future__ import annotations

import pytest

from app.bench.compare import compare_runs, render_comparison
from tests.support.bench_builders import profile, run

A = run(
    profile("baseline", 36.0),
    profile("stack", 100.0, accept_length=3.0),
    profile("humming", 40.0),
)
B = run(
    profile("baseline", 39.6),  # +10%: better
    profile("stack", 90.0, accept_length=2.94, errors=1),  # -10% speed, -2% accept, 0 -> 1 error
    profile("humming+fp8", 44.0),
)


def _change(comparison, profile_name: str, metric: str):
    return next(
        c for c in comparison.changes if c.profile == profile_name and c.metric.key == metric
    )


def test_changes_are_absolute_and_relative() -> None:
    comparison = compare_runs(A, B, threshold_pct=5)
    faster = _change(comparison, "baseline", "decode_tps")
    assert (faster.before, faster.after) == (36.0, 39.6)
    assert faster.pct == pytest.approx(10.0)
    assert not faster.regression
    tpot = _change(comparison, "baseline", "tpot_s")
    assert tpot.pct == pytest.approx((1 / 39.6 - 1 / 36.0) * 36.0 * 100)
    assert not tpot.regression  # lower TPOT is better


def test_regressions_beyond_the_threshold_are_flagged() -> None:
    comparison = compare_runs(A, B, threshold_pct=5)
    flagged = {(c.profile, c.metric.key) for c in comparison.regressions}
    assert flagged == {("stack", "decode_tps"), ("stack", "tpot_s"), ("stack", "errors")}
    assert not _change(comparison, "stack", "accept_length").regression  # -2% is within 5%
    lenient = compare_runs(A, B, threshold_pct=15)
    assert {(c.profile, c.metric.key) for c in lenient.regressions} == {("stack", "errors")}


def test_profiles_in_one_run_only_are_listed() -> None:
    comparison = compare_runs(A, B, threshold_pct=5)
    assert comparison.only_a == (("synthetic", "humming"),)
    assert comparison.only_b == (("synthetic", "humming+fp8"),)
    assert {c.profile for c in comparison.changes} == {"baseline", "stack"}


def test_a_profile_missing_or_failed_in_b_makes_b_worse() -> None:
    assert compare_runs(A, B, threshold_pct=5).worse  # humming is only in A
    assert not compare_runs(A, A, threshold_pct=5).worse
    failed = compare_runs(
        run(profile("stack", 100.0)), run(profile("stack", None, errors=4)), threshold_pct=5
    )
    assert ("stack", "decode_tps") in {(c.profile, c.metric.key) for c in failed.regressions}
    assert failed.worse


def test_metrics_neither_run_has_are_left_out() -> None:
    comparison = compare_runs(A, B, threshold_pct=5)
    assert not any(c.metric.key == "accuracy" for c in comparison.changes)
    assert not any(c.profile == "baseline" and c.metric.key == "accept_length"
                   for c in comparison.changes)  # fmt: skip


def test_rendered_comparison() -> None:
    text = render_comparison(compare_runs(A, B, threshold_pct=5), threshold_pct=5)
    lines = text.splitlines()
    assert lines[0] == "synthetic"
    assert next(line for line in lines if line.startswith("baseline  decode tok/s")).split() == [
        "baseline", "decode", "tok/s", "36.00", "39.60", "+3.60", "(+10.0%)",
    ]  # fmt: skip
    stack_speed = next(line for line in lines if line.startswith("stack     decode tok/s"))
    assert stack_speed.split()[-3:] == ["-10.00", "(-10.0%)", "REGRESSION"]
    errors = next(line for line in lines if line.startswith("stack     errors"))
    assert errors.split()[-2:] == ["+1", "REGRESSION"]
    assert "only in A: humming on synthetic" in lines
    assert "only in B: humming+fp8 on synthetic" in lines
    assert lines[-1] == "3 regressions beyond 5%; 1 measured in A missing from B"
