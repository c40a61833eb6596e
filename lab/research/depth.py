"""NEXTN draft depth: expected TPOT per number of draft steps, and SGLang's adaptive rule.

TPOT at depth k is round(k) / a(k, p), with a(k, p) and the adaptive rule's steady state from
`draft_chain` (a geometric chain, the simplest model; every output says so). round(k), one
draft+verify round at k steps, does not depend on how many tokens are accepted (CUDA graphs
of fixed shape); it comes from the byte model on the fitted Spark or from a kernel profile
of that depth.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.bench.bytemodel.kernels import KernelProfile, Phase
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.bytemodel.mtp import Routing
from app.bench.bytemodel.unit_bytes import unit_bytes
from app.levers.draft.nextn import STEPS as NEXTN_STEPS
from lab.research.draft_chain import (
    SGLANG_BATCH1,
    AdaptiveRule,
    accept_length,
    adaptive_mean_field,
    adaptive_occupancy,
    fit_acceptance,
)
from lab.research.spark_fit import Fit

ACCEPT_MODEL: Final = (
    f"geometric chain: one acceptance probability p a draft token, fitted at {NEXTN_STEPS} steps"
)
ROUND_PROFILE: Final = "stack-recurrent"
"""The round priced at each depth: the stack with SGLang's recurrent verify."""
PLAIN_PROFILE: Final = "humming+fp8"
"""The stack without NEXTN: the plain decode step the speed-ups are over."""


@dataclass(frozen=True, slots=True)
class AcceptProfile:
    """An accept length measured at `steps` draft steps, and its name."""

    name: str
    accept_length: float
    steps: int = NEXTN_STEPS


ACCEPT_PROFILES: Final = (
    AcceptProfile("GSM8K-like", 2.68),
    AcceptProfile("synthetic", 3.9),
)
"""NVIDIA's published stack accept lengths at 3 steps: GSM8K and synthetic 32K."""


@dataclass(frozen=True, slots=True)
class AcceptModel:
    """An accept profile's fitted p and the adaptive rule's steady state under it."""

    profile: AcceptProfile
    p: float
    adaptive_mean_field_steps: int
    adaptive_occupancy: Mapping[int, float]
    """Share of verifies at each depth in a seeded simulation of the rule."""
    simulated_rounds: int
    seed: int


def accept_model(
    profile: AcceptProfile,
    rule: AdaptiveRule = SGLANG_BATCH1,
    *,
    rounds: int = 100_000,
    seed: int = 0,
) -> AcceptModel:
    """Fit p to `profile` and find where `rule` settles under it."""
    p = fit_acceptance(profile.accept_length, profile.steps)
    return AcceptModel(
        profile=profile,
        p=p,
        adaptive_mean_field_steps=adaptive_mean_field(rule, p),
        adaptive_occupancy=adaptive_occupancy(rule, p, rounds=rounds, seed=seed),
        simulated_rounds=rounds,
        seed=seed,
    )


@dataclass(frozen=True, slots=True)
class RoundCosts:
    """One regime's time of a round at each depth, and of a plain decode step."""

    regime: str
    """Where the times come from, e.g. "Spark projection (byte model, ...)"."""
    round_ms: Mapping[int, float]
    decode_ms: float | None


def byte_model_costs(
    fit: Fit,
    *,
    context_tokens: int,
    steps: Iterable[int],
    routing: Routing = Routing.INDEPENDENT,
    config: Mapping[str, Any] = LING_3_FLASH_CONFIG,
) -> RoundCosts:
    """ROUND_PROFILE's round per depth and its plain step, bytes at the fitted Spark bandwidth.

    Raises:
        ValueError: The fit has a fixed cost per kernel call: the byte model has no kernel
            counts for other depths.
    """
    if fit.fixed_us:
        raise ValueError(
            f"the fit costs {fit.fixed_us:.2f} us a kernel call; the byte model has no "
            "kernel calls per depth (give kernel profiles of each depth instead)"
        )
    kw: dict[str, Any] = {"context_tokens": context_tokens, "config": config}

    def ms(nbytes: Mapping[Any, float]) -> float:
        return fit.bandwidth_ms(math.fsum(nbytes.values()))

    rounds = {
        k: ms(unit_bytes(ROUND_PROFILE, Phase.VERIFY, draft_steps=k, routing=routing, **kw))
        for k in sorted(set(steps))
    }
    return RoundCosts(
        regime=f"Spark projection (byte model, {routing} routing, {fit.bandwidth_gbps:.1f} GB/s, "
        f"{context_tokens} context)",
        round_ms=rounds,
        decode_ms=ms(unit_bytes(PLAIN_PROFILE, Phase.DECODE, **kw)),
    )


def profiled_costs(rounds: Sequence[KernelProfile], decode: KernelProfile | None) -> RoundCosts:
    """GPU time of a round per depth from verify profiles, and of a step from a decode one.

    Raises:
        ValueError: No verify profile, a profile of the wrong phase, a depth given twice, or
            profiles of different GPUs, models, contexts or profiles.
    """
    if not rounds:
        raise ValueError("no verify profile")
    if any(r.phase is not Phase.VERIFY for r in rounds):
        raise ValueError("round profiles must be of phase verify")
    if decode is not None and decode.phase is not Phase.DECODE:
        raise ValueError(f"the plain step's profile ({decode.profile}) is not of phase decode")
    depths = [r.draft_steps for r in rounds]
    if len(set(depths)) < len(depths):
        raise ValueError(f"a depth is given twice: {sorted(depths)}")
    first = rounds[0]

    def run(p: KernelProfile) -> tuple[str, int, int]:
        return p.gpu, p.layers, p.context_tokens

    if any((r.label, *run(r)) != (first.label, *run(first)) for r in rounds):
        raise ValueError("round profiles differ in profile, GPU, layers or context")
    if decode is not None and run(decode) != run(first):
        raise ValueError("the plain step was profiled on another GPU, model or context")
    return RoundCosts(
        regime=f"{first.gpu} measured round time (GPU kernel time, {first.label}, "
        f"{first.layers} layers, {first.context_tokens} context)",
        round_ms={r.draft_steps: r.unit_ms for r in sorted(rounds, key=lambda r: r.draft_steps)},
        decode_ms=None if decode is None else decode.unit_ms,
    )


@dataclass(frozen=True, slots=True)
class DepthRow:
    """Fixed depth k in one regime under one accept profile."""

    steps: int
    accept_length: float
    """a(k, p) of the geometric chain."""
    round_ms: float
    tpot_ms: float
    speedup: float | None
    """Over the regime's plain decode step."""


@dataclass(frozen=True, slots=True)
class AdaptiveEstimate:
    """SGLang's adaptive rule in one regime under one accept profile."""

    mean_field_steps: int
    occupancy: Mapping[int, float]
    tpot_ms: float | None
    """sum occupancy x round / sum occupancy x a; None when a visited depth has no round."""
    missing_steps: tuple[int, ...]
    """Depths it visits that the regime has no round time for."""
    gain: float | None
    """TPOT at the default depth over its TPOT, - 1: > 0 when adaptive is faster."""


@dataclass(frozen=True, slots=True)
class DepthVerdict:
    """The best fixed depth and adaptive against the default 3, one regime and profile."""

    regime: str
    profile: AcceptProfile
    model: str
    p: float
    rows: tuple[DepthRow, ...]
    best_steps: int
    best_gain: float
    """TPOT at the default depth over TPOT at the best, - 1."""
    adaptive: AdaptiveEstimate


def evaluate(costs: RoundCosts, model: AcceptModel) -> DepthVerdict:
    """Every depth `costs` has, under `model`'s chain, and the adaptive rule's TPOT.

    Raises:
        ValueError: `costs` has no round at the default depth.
    """
    if NEXTN_STEPS not in costs.round_ms:
        raise ValueError(f"{costs.regime}: no round at the default {NEXTN_STEPS} steps")
    p = model.p
    rows = []
    for k, round_ms in sorted(costs.round_ms.items()):
        k_tpot = round_ms / accept_length(k, p)
        speedup = None if costs.decode_ms is None else costs.decode_ms / k_tpot
        rows.append(DepthRow(k, accept_length(k, p), round_ms, k_tpot, speedup))
    tpot = {row.steps: row.tpot_ms for row in rows}
    best = min(tpot, key=lambda k: (tpot[k], k != NEXTN_STEPS, k))
    occupancy = model.adaptive_occupancy
    missing = tuple(k for k in occupancy if k not in costs.round_ms)
    adaptive_tpot = None
    if not missing:
        time = math.fsum(share * costs.round_ms[k] for k, share in occupancy.items())
        tokens = math.fsum(share * accept_length(k, p) for k, share in occupancy.items())
        adaptive_tpot = time / tokens
    return DepthVerdict(
        regime=costs.regime,
        profile=model.profile,
        model=ACCEPT_MODEL,
        p=p,
        rows=tuple(rows),
        best_steps=best,
        best_gain=tpot[NEXTN_STEPS] / tpot[best] - 1,
        adaptive=AdaptiveEstimate(
            mean_field_steps=model.adaptive_mean_field_steps,
            occupancy=occupancy,
            tpot_ms=adaptive_tpot,
            missing_steps=missing,
            gain=None if adaptive_tpot is None else tpot[NEXTN_STEPS] / adaptive_tpot - 1,
        ),
    )


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One regime's verdicts over every accept profile, and what they say of the default.

    A rival replaces the default depth only if it is no slower under any accept profile and
    faster under one: the profiles are not weighed against each other.
    """

    regime: str
    verdicts: tuple[DepthVerdict, ...]
    replacement_steps: int | None
    """The fixed depth that beats the default so, with the largest smallest gain; None: keep
    the default."""
    replacement_min_gain: float | None
    """Its smallest gain over the default, across profiles."""
    adaptive_beats_default: bool | None
    """Whether adaptive beats the default so; None when a profile's adaptive TPOT is unknown."""
    adaptive_min_gain: float | None


def _beats(gains: Sequence[float]) -> bool:
    return min(gains) >= 0 and max(gains) > 0


def recommend(verdicts: Sequence[DepthVerdict]) -> Recommendation:
    """Which fixed depth, if any, and whether adaptive, beat the default under every profile.

    Raises:
        ValueError: No verdicts, or verdicts of different regimes.
    """
    if not verdicts or len({v.regime for v in verdicts}) != 1:
        raise ValueError("a recommendation needs verdicts of one regime")
    tpots = [{row.steps: row.tpot_ms for row in v.rows} for v in verdicts]
    gains = {
        k: [t[NEXTN_STEPS] / t[k] - 1 for t in tpots]
        for k in sorted(set.intersection(*(set(t) for t in tpots)) - {NEXTN_STEPS})
    }
    rivals = [k for k, g in gains.items() if _beats(g)]
    best = max(rivals, key=lambda k: min(gains[k]), default=None)
    adaptive = [v.adaptive.gain for v in verdicts]
    known = [g for g in adaptive if g is not None]
    beats: bool | None = None
    if len(known) == len(adaptive):
        beats = _beats(known)
    elif known and min(known) < 0:
        beats = False
    return Recommendation(
        regime=verdicts[0].regime,
        verdicts=tuple(verdicts),
        replacement_steps=best,
        replacement_min_gain=None if best is None else min(gains[best]),
        adaptive_beats_default=beats,
        adaptive_min_gain=min(known) if len(known) == len(adaptive) else None,
    )
