"""A projection (not a measurement) of each profile's speed on a DGX Spark from profiled kernels.

Per kernel of one decode step or NEXTN round: Spark time = bytes / BW + c. The bytes are
the byte model's (app.telemetry, with SGLang 0.5.23's formats) at the published context,
split over a category's kernels by their share of the profiled GPU's time; BW is one
sustained bandwidth and c one fixed cost per kernel call. So a unit costs B / BW + N c:
B its bytes, N its kernel calls from the profile. BW and c are fitted by least squares to
NVIDIA's measured Spark TPOTs. When the best fit has c < 0, c is held at 0 and only BW is
fitted (`Fit.constrained`).

A DSpark round is the byte model's too (`unit_bytes`): a 9-token verify and the draft's
published parameter count; its kernels are the profiled GPU's.

Two things cannot be measured on the project's GPU and are modelled instead:
- the baseline's FlashInfer MXFP4 MoE: the baseline is projected from Humming's kernels
  (same bytes), so its residual is the gap between the two MoE runners;
- the FP32-logits head: its BF16 weight's bytes plus FP32 logits, with the kernels the
  `humming` profile (also FP32 logits) ran.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from app.bench.bytemodel.kernels import (
    Category,
    KernelMap,
    KernelProfile,
    KernelRecord,
    Phase,
    map_kernels,
)
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.bytemodel.unit_bytes import unit_bytes
from lab.research.host_time import CPU_FACTOR, HostProjection, HostRun, host_projection
from lab.research.spark_fit import Fit, FitPoint, fit_spark

PUBLISHED_TPOT_MS: Final = {"baseline": 27.71, "humming": 25.35, "humming+fp8": 22.76}
"""NVIDIA's measured Spark TPOTs, 32K in / 2K out, no speculation (its DGX Spark blog post)."""
PUBLISHED_CONTEXT_TOKENS: Final = 32768 + 1024
"""Mean context of those runs' decode steps: the prompt plus half the reply."""
NVIDIA_ROUND_STEP_RATIO: Final = 2.26
"""A NEXTN round's time over a step's, inferred from NVIDIA's published GSM8K run."""
PUBLISHED_STACK_TPOT_MS: Final = {2.68: 18.56, 3.9: 9.72}
"""NVIDIA's measured stack TPOT at its accept length: GSM8K (2.68), synthetic 32K (3.90);
its verify was SGLang's recurrent one."""
PUBLISHED_DSPARK_ACCEPT: Final = 5.29
"""inclusionAI's published accept length of the DSpark draft (spark-recipes.md section 3)."""
HOST_ACCEPTS: Final = {"stack": 2.68, "dspark": PUBLISHED_DSPARK_ACCEPT}
"""The accept length each profile's round is priced at with its host term: NVIDIA's GSM8K
accept length for NEXTN, inclusionAI's published one for DSpark."""
HEAD_SPEEDUP_TARGET: Final = 1.10
"""The FP8-head round must be at least this much faster than the BF16-head round."""
KERNELS_FROM: Final = {"baseline": "humming"}
"""Profiles projected from another profile's kernels (see the module docstring)."""
BF16_HEAD_ROUND: Final = "humming+nextn"
LEVER_PAIRS: Final = (
    ("stack+bf16-router", "stack"),
    ("dspark+fp8-draft", "dspark"),
    ("stack+hot-vocab", "stack"),
)
"""The opt-in levers' rigs, each with the profile it changes one lever of."""
RECURRENT_ROUND: Final = "stack-recurrent"
"""The stack with SGLang's recurrent verify, as NVIDIA ran it and as the BF16-head round
verifies: the FP8-head round of the NEXTN verdict."""


@dataclass(frozen=True, slots=True)
class UnitLoad:
    """What one step or round moves and launches, by byte category."""

    bytes: Mapping[Category, float]
    calls: Mapping[Category, float]
    gpu_us: Mapping[Category, float]
    """Time on the profiled GPU."""

    @property
    def total_bytes(self) -> float:
        """All bytes of the unit."""
        return math.fsum(self.bytes.values())

    @property
    def total_calls(self) -> float:
        """All kernel calls of the unit."""
        return math.fsum(self.calls.values())


def unit_load(
    profile: KernelProfile, kmap: KernelMap, nbytes: Mapping[Category, float]
) -> UnitLoad:
    """Bytes, calls and profiled time of one unit, by category."""
    calls: dict[Category, float] = defaultdict(float)
    gpu_us: dict[Category, float] = defaultdict(float)
    for kernel in profile.kernels:
        n, us = profile.per_unit(kernel)
        calls[kmap.categories[kernel.name]] += n
        gpu_us[kmap.categories[kernel.name]] += us
    return UnitLoad(bytes=dict(nbytes), calls=dict(calls), gpu_us=dict(gpu_us))


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel a step or round: its profiled time, its bytes and its projected time."""

    name: str
    category: Category
    calls: float
    gpu_us: float
    bytes: float
    projected_us: float


@dataclass(frozen=True, slots=True)
class ProfileProjection:
    """One profile's projected step (phase decode) or round (phase verify) on the Spark."""

    profile: str
    phase: Phase
    kernels_from: str
    """The profile whose kernels were used (itself, or humming for the baseline)."""
    gpu: str
    layers: int
    bytes: float
    calls: float
    gpu_ms: float
    """The unit's kernel time on the profiled GPU."""
    bandwidth_ms: float
    fixed_ms: float
    projected_ms: float
    published_ms: float | None
    residual_ms: float | None
    """published - projected."""
    bytes_by_category: Mapping[Category, float]
    calls_by_category: Mapping[Category, float]
    categories_without_kernels: tuple[Category, ...]
    """Categories with bytes but no kernel: their bytes still count at BW."""
    unmapped: tuple[str, ...]
    kernels: tuple[KernelRow, ...] = field(repr=False)


def project(
    name: str, profile: KernelProfile, kmap: KernelMap, load: UnitLoad, fit: Fit
) -> ProfileProjection:
    """`profile`'s kernels with `load`'s bytes, on the fitted Spark, reported as `name`."""
    rows = []
    for kernel in profile.kernels:
        category = kmap.categories[kernel.name]
        calls, us = profile.per_unit(kernel)
        share = (
            us / load.gpu_us[category] if load.gpu_us[category] else calls / load.calls[category]
        )
        nbytes = load.bytes.get(category, 0.0) * share
        projected = (fit.bandwidth_ms(nbytes) + fit.fixed_ms(calls)) * 1e3
        rows.append(KernelRow(kernel.name, category, calls, us, nbytes, projected))
    bandwidth_ms = fit.bandwidth_ms(load.total_bytes)
    fixed_ms = fit.fixed_ms(load.total_calls)
    projected_ms = bandwidth_ms + fixed_ms
    published = PUBLISHED_TPOT_MS.get(name) if profile.phase is Phase.DECODE else None
    return ProfileProjection(
        profile=name,
        phase=profile.phase,
        kernels_from=profile.label,
        gpu=profile.gpu,
        layers=profile.layers,
        bytes=load.total_bytes,
        calls=load.total_calls,
        gpu_ms=math.fsum(load.gpu_us.values()) / 1e3,
        bandwidth_ms=bandwidth_ms,
        fixed_ms=fixed_ms,
        projected_ms=projected_ms,
        published_ms=published,
        residual_ms=None if published is None else published - projected_ms,
        bytes_by_category=load.bytes,
        calls_by_category=load.calls,
        categories_without_kernels=tuple(
            c for c, b in load.bytes.items() if b and not load.calls.get(c)
        ),
        unmapped=kmap.unmapped,
        kernels=tuple(sorted(rows, key=lambda r: -r.projected_us)),
    )


@dataclass(frozen=True, slots=True)
class AcceptRow:
    """Projected TPOT of the recurrent-verify stack at one accept length, FP8 head against
    BF16 head."""

    accept_length: float
    fp8_head_tpot_ms: float
    bf16_head_tpot_ms: float
    speedup: float
    """BF16-head TPOT over FP8-head TPOT. A round's bytes and kernels do not depend on the
    accept length (CUDA graphs of fixed shape), so neither does this ratio."""
    meets_target: bool
    published_stack_tpot_ms: float | None


@dataclass(frozen=True, slots=True)
class NextnProjection:
    """The projected NEXTN round with the recurrent verify: its cost over a step, and what
    the FP8 head buys."""

    fp8_round_ms: float
    bf16_round_ms: float
    bf16_round_source: str
    step_ms: float
    """The projected humming+fp8 decode step."""
    round_step_ratio: float
    nvidia_round_step_ratio: float
    gpu_fp8_round_ms: float
    gpu_bf16_round_ms: float
    gpu_direction_agrees: bool
    """The profiled GPU's kernel time also has the FP8-head round faster."""
    accept: tuple[AcceptRow, ...]


def derive_bf16_round(
    stack: KernelProfile, stack_map: KernelMap, humming: KernelProfile
) -> tuple[KernelProfile, KernelMap]:
    """A NEXTN round with its head kernels swapped for the humming step's, once a forward."""
    hum_map = map_kernels(humming)
    kept = [k for k in stack.kernels if stack_map.categories[k.name] is not Category.LM_HEAD]
    scale = stack.rounds * stack.forwards / humming.rounds
    heads = [
        KernelRecord(k.name, round(k.calls * scale), k.total_us * scale)
        for k in humming.kernels
        if hum_map.categories[k.name] is Category.LM_HEAD
    ]
    categories = {k.name: stack_map.categories[k.name] for k in kept}
    categories.update({k.name: Category.LM_HEAD for k in heads})
    derived = replace(stack, profile=BF16_HEAD_ROUND, kernels=tuple(kept + heads))
    return derived, KernelMap(categories=categories, unmapped=stack_map.unmapped)


@dataclass(frozen=True, slots=True)
class ReplaySsmProjection:
    """The stack's projected round with the recurrent KDA verify (`stack-recurrent`) and
    with ReplaySSM (`stack`)."""

    recurrent_round_ms: float
    replayssm_round_ms: float
    speedup: float
    """Recurrent round over ReplaySSM round (> 1: ReplaySSM is faster)."""
    gpu_recurrent_round_ms: float
    gpu_replayssm_round_ms: float
    gpu_direction_agrees: bool
    """The profiled GPU's kernel time moves the same way as the projection."""


@dataclass(frozen=True, slots=True)
class DsparkProjection:
    """The DSpark round against the stack's: the accept length it needs to break even."""

    round_ms: float
    stack_round_ms: float
    break_even: float
    """DSpark's accept length over the stack's at which both have the same TPOT."""
    published_accept: float
    tpot_ms_at_published_accept: float
    gpu_round_ms: float
    gpu_stack_round_ms: float


@dataclass(frozen=True, slots=True)
class LeverProjection:
    """An opt-in lever's round against the round of the profile it changes."""

    profile: str
    base: str
    round_ms: float
    base_round_ms: float
    saving: float
    """1 - round / base round: the share of a round the lever saves at equal accept length."""
    bytes: float
    base_bytes: float
    gpu_round_ms: float
    gpu_base_round_ms: float


@dataclass(frozen=True, slots=True)
class SparkProjection:
    """Every profile's projection, the fit behind them, the NEXTN and ReplaySSM verdicts."""

    context_tokens: int
    fit: Fit
    fit_points: tuple[FitPoint, ...]
    profiles: tuple[ProfileProjection, ...]
    nextn: NextnProjection | None
    replayssm: ReplaySsmProjection | None = None
    dspark: DsparkProjection | None = None
    host: HostProjection | None = None
    """The host term a round, when a host-time file was given."""
    levers: tuple[LeverProjection, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of `lab/results/spark-projection.json`."""
        return {
            "kind": "projection",
            "note": "A projection from kernels profiled on another GPU, not a measurement "
            "on a Spark. Per kernel: bytes / bandwidth + a fixed cost a call; bandwidth "
            "and fixed cost fitted to NVIDIA's published Spark TPOTs. The baseline uses "
            "Humming's kernels (its FlashInfer MoE cannot run here): its residual is the "
            "gap between the MoE runners. The FP32-logits head is its BF16 weight's bytes "
            "plus FP32 logits.",
            "context_tokens": self.context_tokens,
            "fit": {
                "bandwidth_gbps": self.fit.bandwidth_gbps,
                "fixed_us_per_kernel": self.fit.fixed_us,
                "constrained": self.fit.constrained,
                "points": [_jsonable(p) for p in self.fit_points],
            },
            "profiles": [_jsonable(p) for p in self.profiles],
            "nextn": None if self.nextn is None else _jsonable(self.nextn),
            "replayssm": None if self.replayssm is None else _jsonable(self.replayssm),
            "dspark": None if self.dspark is None else _jsonable(self.dspark),
            **({} if self.host is None else {"host": _jsonable(self.host)}),
            "levers": [_jsonable(lever) for lever in self.levers],
        }

    def with_host(self, run: HostRun, cpu_factor: float = CPU_FACTOR) -> SparkProjection:
        """This projection with the host term of every engine in `run` whose profile has a
        projected round, at `HOST_ACCEPTS`.

        Raises:
            ValueError: see `lab.research.host_time.host_projection`.
        """
        rounds = {
            p.profile: p.projected_ms
            for p in self.profiles
            if p.phase is Phase.VERIFY and p.profile in HOST_ACCEPTS
        }
        host = host_projection(run, rounds, HOST_ACCEPTS, cpu_factor=cpu_factor)
        return replace(self, host=host)


def _jsonable(record: Any) -> Any:
    if hasattr(record, "__dataclass_fields__"):
        return {name: _jsonable(getattr(record, name)) for name in record.__dataclass_fields__}
    if isinstance(record, Mapping):
        return {str(k): _jsonable(v) for k, v in record.items()}
    if isinstance(record, tuple):
        return [_jsonable(v) for v in record]
    return str(record) if isinstance(record, Category | Phase) else record


def spark_projection(
    profiles: Iterable[KernelProfile],
    *,
    config: Mapping[str, Any] = LING_3_FLASH_CONFIG,
    context_tokens: int = PUBLISHED_CONTEXT_TOKENS,
) -> SparkProjection:
    """Fit the Spark to the published TPOTs and project every profile.

    Raises:
        ValueError: A profile of another depth than `config`'s, one given twice, or too
            few decode profiles for the fit.
    """
    by_key: dict[tuple[str, Phase], KernelProfile] = {}
    for p in profiles:
        if p.layers != config["num_hidden_layers"]:
            raise ValueError(
                f"{p.profile} ({p.phase}) was profiled at {p.layers} layers; the projection "
                f"needs the {config['num_hidden_layers']}-layer model's kernels"
            )
        if (p.label, p.phase) in by_key:
            raise ValueError(f"{p.label} ({p.phase}) is given twice")
        by_key[(p.label, p.phase)] = p

    def load_of(name: str, profile: KernelProfile, kmap: KernelMap) -> UnitLoad:
        nbytes = unit_bytes(
            name,
            profile.phase,
            context_tokens=context_tokens,
            config=config,
            draft_steps=profile.draft_steps,
        )
        return unit_load(profile, kmap, nbytes)

    units: list[tuple[str, KernelProfile, KernelMap]] = []
    for name in PUBLISHED_TPOT_MS:
        source = by_key.get((KERNELS_FROM.get(name, name), Phase.DECODE))
        if source is not None:
            units.append((name, source, map_kernels(source)))
    for (name, phase), p in by_key.items():
        if name not in PUBLISHED_TPOT_MS or phase is Phase.VERIFY:
            units.append((name, p, map_kernels(p)))
    sources = {p.profile for n, p, _ in units if n in PUBLISHED_TPOT_MS}
    if len(sources) < 2:
        raise ValueError(
            "the fit needs decode kernel profiles of at least two of: "
            + ", ".join(sorted({KERNELS_FROM.get(n, n) for n in PUBLISHED_TPOT_MS}))
        )
    loads = {(n, p.phase): load_of(n, p, m) for n, p, m in units}
    points = tuple(
        FitPoint(
            n,
            loads[(n, p.phase)].total_bytes,
            loads[(n, p.phase)].total_calls,
            PUBLISHED_TPOT_MS[n],
        )
        for n, p, _ in units
        if n in PUBLISHED_TPOT_MS
    )
    fit = fit_spark(points)
    projections = tuple(project(n, p, m, loads[(n, p.phase)], fit) for n, p, m in units)
    nextn = _nextn(by_key, projections, fit, load_of)
    return SparkProjection(
        context_tokens,
        fit,
        points,
        projections,
        nextn,
        _replayssm(projections),
        _dspark(projections),
        levers=_levers(projections),
    )


def _rounds(
    projections: Sequence[ProfileProjection], first: str, second: str
) -> tuple[ProfileProjection, ProfileProjection] | None:
    """The rounds of two profiles, when both were profiled."""
    rounds = {p.profile: p for p in projections if p.phase is Phase.VERIFY}
    a, b = rounds.get(first), rounds.get(second)
    return None if a is None or b is None else (a, b)


def _replayssm(projections: Sequence[ProfileProjection]) -> ReplaySsmProjection | None:
    """The stack's round with the recurrent and the ReplaySSM verify, when both were profiled."""
    if (pair := _rounds(projections, RECURRENT_ROUND, "stack")) is None:
        return None
    recurrent, replay = pair
    return ReplaySsmProjection(
        recurrent_round_ms=recurrent.projected_ms,
        replayssm_round_ms=replay.projected_ms,
        speedup=recurrent.projected_ms / replay.projected_ms,
        gpu_recurrent_round_ms=recurrent.gpu_ms,
        gpu_replayssm_round_ms=replay.gpu_ms,
        gpu_direction_agrees=(replay.gpu_ms < recurrent.gpu_ms)
        == (replay.projected_ms < recurrent.projected_ms),
    )


def _dspark(projections: Sequence[ProfileProjection]) -> DsparkProjection | None:
    """The DSpark round against the stack's, when both were profiled."""
    if (pair := _rounds(projections, "dspark", "stack")) is None:
        return None
    dspark, stack = pair
    return DsparkProjection(
        round_ms=dspark.projected_ms,
        stack_round_ms=stack.projected_ms,
        break_even=dspark.projected_ms / stack.projected_ms,
        published_accept=PUBLISHED_DSPARK_ACCEPT,
        tpot_ms_at_published_accept=dspark.projected_ms / PUBLISHED_DSPARK_ACCEPT,
        gpu_round_ms=dspark.gpu_ms,
        gpu_stack_round_ms=stack.gpu_ms,
    )


def _levers(projections: Sequence[ProfileProjection]) -> tuple[LeverProjection, ...]:
    """Each opt-in lever's round against its base profile's, where both were profiled."""
    found = []
    for profile, base in LEVER_PAIRS:
        if (pair := _rounds(projections, profile, base)) is None:
            continue
        lever, before = pair
        found.append(
            LeverProjection(
                profile=profile,
                base=base,
                round_ms=lever.projected_ms,
                base_round_ms=before.projected_ms,
                saving=1 - lever.projected_ms / before.projected_ms,
                bytes=lever.bytes,
                base_bytes=before.bytes,
                gpu_round_ms=lever.gpu_ms,
                gpu_base_round_ms=before.gpu_ms,
            )
        )
    return tuple(found)


def _nextn(
    by_key: Mapping[tuple[str, Phase], KernelProfile],
    projections: Sequence[ProfileProjection],
    fit: Fit,
    load_of: Callable[[str, KernelProfile, KernelMap], UnitLoad],
) -> NextnProjection | None:
    stack = by_key.get((RECURRENT_ROUND, Phase.VERIFY))
    step = next(
        (p for p in projections if (p.profile, p.phase) == ("humming+fp8", Phase.DECODE)), None
    )
    if stack is None or step is None:
        return None
    fp8 = next(p for p in projections if (p.profile, p.phase) == (RECURRENT_ROUND, Phase.VERIFY))
    measured = by_key.get((BF16_HEAD_ROUND, Phase.VERIFY))
    if measured is not None:
        bf16 = next(
            p for p in projections if (p.profile, p.phase) == (BF16_HEAD_ROUND, Phase.VERIFY)
        )
        source = f"measured: the {BF16_HEAD_ROUND} round"
    elif (humming := by_key.get(("humming", Phase.DECODE))) is not None:
        derived, dmap = derive_bf16_round(stack, map_kernels(stack), humming)
        bf16 = project(BF16_HEAD_ROUND, derived, dmap, load_of(BF16_HEAD_ROUND, derived, dmap), fit)
        source = (
            f"derived: the {RECURRENT_ROUND} round with BF16 head bytes and its head kernels "
            "swapped for the humming step's (FP32 logits), once a forward"
        )
    else:
        return None
    accept = tuple(
        AcceptRow(
            accept_length=a,
            fp8_head_tpot_ms=fp8.projected_ms / a,
            bf16_head_tpot_ms=bf16.projected_ms / a,
            speedup=bf16.projected_ms / fp8.projected_ms,
            meets_target=bf16.projected_ms / fp8.projected_ms >= HEAD_SPEEDUP_TARGET,
            published_stack_tpot_ms=PUBLISHED_STACK_TPOT_MS.get(a),
        )
        for a in sorted(PUBLISHED_STACK_TPOT_MS)
    )
    return NextnProjection(
        fp8_round_ms=fp8.projected_ms,
        bf16_round_ms=bf16.projected_ms,
        bf16_round_source=source,
        step_ms=step.projected_ms,
        round_step_ratio=fp8.projected_ms / step.projected_ms,
        nvidia_round_step_ratio=NVIDIA_ROUND_STEP_RATIO,
        gpu_fp8_round_ms=fp8.gpu_ms,
        gpu_bf16_round_ms=bf16.gpu_ms,
        gpu_direction_agrees=fp8.gpu_ms < bf16.gpu_ms,
        accept=accept,
    )
