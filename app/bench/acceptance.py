"""Acceptance by draft position, pooled from SGLang's per-request histograms, and whether
SGLang forced acceptance (`SGLANG_SIMULATE_ACC_LEN`) instead of measuring it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SIMULATE_ENV = "SGLANG_SIMULATE_ACC_LEN"
"""SGLang's benchmark knob: a value > 0 forces this accept length instead of verifying."""


@dataclass(frozen=True, slots=True)
class PositionAcceptance:
    """Verify rounds pooled over requests, and the share that accepted each draft position."""

    histogram: tuple[int, ...]
    """Verify rounds by correct drafts 0, 1, 2, ... (SGLang's `spec_correct_drafts_histogram`)."""
    rates: tuple[float, ...]
    """rates[i - 1]: the share of rounds that accepted draft i (had >= i correct drafts).

    SGLang's histogram ends at the most correct drafts seen, so positions past it are left
    out (their rate is 0)."""
    accept_length: float
    """1 + mean correct drafts per round (= 1 + sum(rates)), to cross-check `accept_length`."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PositionAcceptance:
        """Rebuild one written by `dataclasses.asdict`."""
        return cls(tuple(data["histogram"]), tuple(data["rates"]), data["accept_length"])


def pooled_position_acceptance(
    histograms: Iterable[Sequence[int] | None],
) -> PositionAcceptance | None:
    """Pool histograms of any lengths (a missing tail counts 0); None without a verify round."""
    present = [h for h in histograms if h]
    width = max((len(h) for h in present), default=0)
    pooled = tuple(sum(h[j] for h in present if j < len(h)) for j in range(width))
    rounds = sum(pooled)
    if not rounds:
        return None
    return PositionAcceptance(
        histogram=pooled,
        rates=tuple(sum(pooled[i:]) / rounds for i in range(1, width)),
        accept_length=1 + sum(j * n for j, n in enumerate(pooled)) / rounds,
    )


def position_cell(positions: PositionAcceptance) -> str:
    """The rates by draft position, e.g. `0.91/0.78/0.60`."""
    return "/".join(f"{rate:.2f}" for rate in positions.rates)


def simulated_accept_length(proof: Mapping[str, Any] | None) -> float | None:
    """The accept length SGLang was told to fake, read from the proof's scheduler env facts;
    None when it measured acceptance (unset, <= 0, or no such fact)."""
    env = ((proof or {}).get("facts") or {}).get("env")
    value = env.get(SIMULATE_ENV) if isinstance(env, Mapping) else None
    try:
        forced = float(value) if value is not None else 0.0
    except ValueError:
        return None
    return forced if forced > 0 else None
