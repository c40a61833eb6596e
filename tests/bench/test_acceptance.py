"""Acceptance by draft position from pooled histograms, and the faked accept length's flag."""

from __future__ import annotations

from typing import Any

import pytest

from app.bench.acceptance import (
    SIMULATE_ENV,
    pooled_position_acceptance,
    position_cell,
    simulated_accept_length,
)
from app.levers.checks.no_faking import FAKING


def test_one_histogram_gives_the_share_of_rounds_past_each_position() -> None:
    # 10 rounds: 1 with 0 correct, 2 with 1, 3 with 2, 4 with 3 (NEXTN, k = 3).
    found = pooled_position_acceptance([(1, 2, 3, 4)])
    assert found is not None
    assert found.histogram == (1, 2, 3, 4)
    assert found.rates == pytest.approx((0.9, 0.7, 0.4))
    assert found.accept_length == pytest.approx(1 + (2 + 6 + 12) / 10)  # 3.0
    assert found.accept_length == pytest.approx(1 + sum(found.rates))
    assert position_cell(found) == "0.90/0.70/0.40"


def test_histograms_of_different_lengths_pool_with_a_zero_tail() -> None:
    # SGLang's histogram ends at the most correct drafts one request saw; DSpark's reach 8.
    short, dspark = (3, 1), (0, 0, 0, 0, 0, 0, 0, 0, 4)
    found = pooled_position_acceptance([short, None, dspark])
    assert found is not None
    assert found.histogram == (3, 1, 0, 0, 0, 0, 0, 0, 4)
    assert found.rates == pytest.approx((5 / 8,) + (4 / 8,) * 7)
    assert found.accept_length == pytest.approx(1 + (1 + 32) / 8)


@pytest.mark.parametrize("histograms", [[], [None, ()], [(0, 0, 0)]])
def test_no_verify_round_gives_none(histograms: list[Any]) -> None:
    assert pooled_position_acceptance(histograms) is None


def test_rounds_that_never_accepted_have_no_positions() -> None:
    found = pooled_position_acceptance([(5,)])
    assert found is not None
    assert (found.rates, found.accept_length) == ((), 1.0)


def _proof(env: Any) -> dict[str, Any]:
    return {"profile": "dspark", "lines": [], "facts": {"env": env}}


@pytest.mark.parametrize(
    ("proof", "expected"),
    [
        (_proof({SIMULATE_ENV: "3.5"}), 3.5),
        (_proof({SIMULATE_ENV: "4"}), 4.0),
        (_proof({SIMULATE_ENV: None}), None),
        (_proof({SIMULATE_ENV: ""}), None),
        (_proof({SIMULATE_ENV: "-1"}), None),  # SGLang's "off"
        (_proof({SIMULATE_ENV: "0"}), None),
        (_proof({"error": "KeyError: x", "trace": ""}), None),
        ({"profile": "stack", "lines": [], "facts": {}}, None),
        (None, None),
    ],
)
def test_the_faked_accept_length_is_read_from_the_scheduler_env(
    proof: dict[str, Any] | None, expected: float | None
) -> None:
    assert simulated_accept_length(proof) == expected


def test_the_variable_read_is_one_the_proof_collects() -> None:
    assert SIMULATE_ENV in FAKING
