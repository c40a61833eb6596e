"""The exact McNemar test against values worked out by hand and by brute force."""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

from app.bench.mcnemar import mcnemar_exact, paired_correctness


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [
        (0, 0, 1.0),  # no discordant pair: nothing to test
        (1, 9, 22 / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10
        (9, 1, 22 / 1024),  # symmetric
        (0, 5, 2 / 32),
        (2, 2, 1.0),  # 2 * 11/16 capped at 1
        (5, 12, 2 * 9402 / 2**17),  # 1 + 17 + 136 + 680 + 2380 + 6188 = 9402
        (0, 1, 1.0),
    ],
)
def test_known_values(b: int, c: int, p: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(p, rel=1e-12)


def test_matches_a_brute_force_binomial_over_every_outcome() -> None:
    for b, c in itertools.product(range(8), repeat=2):
        n = b + c
        if n == 0:
            continue
        # P(outcome at least as extreme as min(b, c) on either side), counted outcome by outcome.
        extreme = sum(
            1
            for outcome in itertools.product((0, 1), repeat=n)
            if min(sum(outcome), n - sum(outcome)) <= min(b, c)
        )
        assert mcnemar_exact(b, c) == pytest.approx(float(min(Fraction(extreme, 2**n), 1)))


def test_large_samples_stay_finite_and_exact() -> None:
    # 1,319 GSM8K questions, all discordant: 2^1319 overflows a float, the integer sum does not.
    assert mcnemar_exact(659, 660) == 1.0
    assert 0.0 < mcnemar_exact(600, 719) < 0.01


def test_negative_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        mcnemar_exact(-1, 3)


def test_pairs_only_the_questions_both_runs_answered() -> None:
    reference = {0: True, 1: True, 2: False, 3: False, 4: True}
    this = {0: True, 1: False, 2: True, 3: False, 5: True}
    paired = paired_correctness(reference, this)
    assert (paired.pairs, paired.both, paired.only_reference, paired.only_this) == (4, 1, 1, 1)
    assert paired.neither == 1
    assert paired.p_value == 1.0
