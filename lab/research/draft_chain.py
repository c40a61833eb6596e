"""Acceptance of a top-1 draft chain, and SGLang 0.5.23's adaptive depth rule under it.

Acceptance is a geometric chain, the simplest model: each draft token is accepted with one
probability p once every token before it was, so a round of k draft steps yields
a(k, p) = sum_{i=0..k} p^i tokens (the bonus token included). p is fitted to one accept
length measured at one depth. The NEXTN layer drafts k tokens by running again on its own
output, so real acceptance per position tends to fall with depth: the chain is optimistic
about deep drafts.

SGLang 0.5.23's `--speculative-adaptive` (speculative/adaptive_spec_params.py; NEXTN is
resolved to EAGLE before its support is checked, so the stack can run it) at batch 1:
candidates 1, 3, 5 and 7 draft steps. After each verify an EMA (alpha 0.2, starting at the
initial steps - 1) takes in the accepted draft tokens; after 10 warm-up verifies, every 5th
verify recomputes the depth: down to each lower candidate c in turn while EMA <= c - 0.5 -
0.25; if it did not move down, up from each candidate c in turn, the current one first, while
EMA > c - 0.5.
Under a stationary p the accepted drafts at depth k are min(G, k), G geometric, so the rule
is a Markov chain of p alone. Its mean-field limit (the EMA at its expectation at every
depth) settles on one candidate; a seeded simulation of the rule gives the share of rounds
at each, which its noisy EMA spreads. Neither credits what the rule is for: acceptance that
changes along a reply. Only a bench shows that.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass
from typing import Final

from app.levers.draft.nextn import STEPS as NEXTN_STEPS


def accept_length(steps: int, p: float) -> float:
    """a(k, p): tokens a round of `steps` drafts yields, the bonus token included."""
    return math.fsum(p**i for i in range(steps + 1))


def fit_acceptance(accept: float, steps: int) -> float:
    """The p whose chain of `steps` drafts yields `accept` tokens a round (bisection).

    Raises:
        ValueError: `accept` outside [1, steps + 1].
    """
    if not 1.0 <= accept <= steps + 1:
        raise ValueError(f"an accept length at {steps} steps lies in [1, {steps + 1}]: {accept}")
    low, high = 0.0, 1.0
    for _ in range(64):
        mid = (low + high) / 2
        if accept_length(steps, mid) < accept:
            low = mid
        else:
            high = mid
    return (low + high) / 2


@dataclass(frozen=True, slots=True)
class AdaptiveRule:
    """One batch-size slot of SGLang's adaptive steps: positive candidates, no EMA ceiling."""

    candidates: tuple[int, ...] = (1, 3, 5, 7)
    up_hysteresis: float = 0.0
    down_hysteresis: float = -0.25
    ema_alpha: float = 0.2
    update_interval: int = 5
    warmup_batches: int = 10
    initial_steps: int = NEXTN_STEPS

    def __post_init__(self) -> None:
        c = self.candidates
        if not c or list(c) != sorted(set(c)) or c[0] < 1:
            raise ValueError(f"candidates must be distinct positive steps, rising: {c}")
        if self.initial_steps not in c:
            raise ValueError(f"initial steps {self.initial_steps} are not a candidate of {c}")
        if self.down_hysteresis > self.up_hysteresis:
            raise ValueError("a down hysteresis above the up one lets the rule oscillate")

    def next_steps(self, current: int, ema: float) -> int:
        """The depth SGLang's recompute picks at `current` steps with this EMA."""
        c = self.candidates
        start = i = c.index(current)
        while i > 0 and ema <= c[i - 1] - 0.5 + self.down_hysteresis:
            i -= 1
        if i == start:
            while i < len(c) - 1 and ema > c[i] - 0.5 + self.up_hysteresis:
                i += 1
        return c[i]


SGLANG_BATCH1: Final = AdaptiveRule()
"""SGLang 0.5.23's DEFAULT_ADAPTIVE_CONFIG["1"] with AdaptiveStepSlot's defaults, started at
the stack's 3 steps."""


def adaptive_mean_field(rule: AdaptiveRule, p: float) -> int:
    """Where the rule settles when its EMA sits at its expectation, a(k, p) - 1, at every k.

    It ends: with accepted drafts rising in k and down_hysteresis <= up_hysteresis, a rule
    that moved up never moves down again, and the other way round.
    """
    steps = rule.initial_steps
    while (following := rule.next_steps(steps, accept_length(steps, p) - 1)) != steps:
        steps = following
    return steps


def adaptive_occupancy(rule: AdaptiveRule, p: float, *, rounds: int, seed: int) -> dict[int, float]:
    """The share of `rounds` verifies at each depth, the rule simulated under a stationary p."""
    rng = random.Random(seed)
    steps, ema = rule.initial_steps, float(rule.initial_steps - 1)
    counts: Counter[int] = Counter()
    for verify in range(1, rounds + 1):
        counts[steps] += 1
        accepted = 0
        while accepted < steps and rng.random() < p:
            accepted += 1
        ema = (1 - rule.ema_alpha) * ema + rule.ema_alpha * accepted
        since = verify - rule.warmup_batches
        if since > 0 and since % rule.update_interval == 0:
            steps = rule.next_steps(steps, ema)
    return {k: counts[k] / rounds for k in rule.candidates if counts[k]}
