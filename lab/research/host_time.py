"""Host time per verify round: what the H200 measured (lab/scripts/gpu_host_time.py) and the
term it adds to a projected Spark round (lab/research/host-pin.md).

A round's wall time is the GPU's busy time plus the time the GPU waited for the host. Under
SGLang 0.5.23's spec-v2 host pin (`FutureMap.resolve_seq_lens_cpu` synchronizing on the
previous verify), the host prepares each round only after the last one's verify, so part of
its Python loop is added to every round; without the pin it runs ahead, and costs a round
only the part of its loop that outlasts the GPU's.

The Spark's host term, per round, from the H200's measurement of the same engine:
- pin on: `cpu_factor` x the H200's GPU-idle time a round (wall - GPU busy). An upper bound:
  the Spark's GPU takes longer over the draft work after the verify, which hides more of the
  host's;
- pin off: the host loop a round (wall less its explicit waits on the GPU) x `cpu_factor`,
  less the Spark's GPU round, when positive;
- either way, at least the pin-off term.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.levers.profiles import PROFILES

CPU_FACTOR: Final = 1.0
"""Assumed Spark host seconds per H200 host second for SGLang's scheduler loop (one Python
thread). GB10 has 10 Cortex-X925 and 10 Cortex-A725 cores; taken: the scheduler thread runs
on an X925, whose single-thread speed is that of the H200 host's server core (its model is in
the host JSON). Not measured: a thread left on an A725, or a slower aarch64 Python, would
raise it; `lab/scripts/spark_projection.py --cpu-factor` prices other values."""
CPU_FACTOR_WHY: Final = (
    "assumed, not measured: SGLang's scheduler thread on a Cortex-X925 (GB10: 10 X925 + "
    "10 A725) as fast as the H200 host's core; a thread on an A725 would be slower"
)


PINNED_BACKENDS: Final = frozenset({"flashinfer"})
"""Attention backends whose spec-v2 forward SGLang 0.5.23 pins by itself (they declare no
`needs_cpu_seq_lens`); a measured row records the scheduler's own decision beside it."""


HOST_LEVERS: Final = ("prepared_commit", "gc_freeze", "fast_cores")
"""ling-chat's host levers (app/levers/host) a run may turn off in an engine, to measure each
one's round against the engine with all of them."""


@dataclass(frozen=True, slots=True)
class Engine:
    """One engine a host-time run boots: a profile on an attention backend, the pin forced on
    or left to SGLang, and the host levers turned `off` in it."""

    profile: str
    backend: str
    force_pin: bool
    off: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """Its log directory, e.g. `stack-triton-pin` or `stack-triton-off-gc_freeze`."""
        name = f"{self.profile}-{self.backend}" + ("-pin" if self.force_pin else "")
        return name + "".join(f"-off-{lever}" for lever in self.off)


def engines(
    profiles: Sequence[str],
    backends: Sequence[str],
    pins: Sequence[str],
    offs: Sequence[str] = ("",),
) -> list[Engine]:
    """Each profile on each backend at each pin setting (`auto`: SGLang's decision, `on`:
    forced) that changes something (a backend pinned by itself is booted once), with each
    set of host levers off in `offs` (`""`: none; `a+b`: both).

    Raises:
        ValueError: a profile without a verify round, another pin setting, another lever.
    """
    if bad := [p for p in profiles if p not in PROFILES or not _speculative(p)]:
        raise ValueError(f"not a speculative profile (no verify round): {', '.join(bad)}")
    if odd := sorted(set(pins) - {"auto", "on"}):
        raise ValueError(f"pin settings are auto and on, not {', '.join(odd)}")
    sets = [tuple(lever for lever in off.split("+") if lever) for off in offs]
    if odd := sorted({lever for off in sets for lever in off} - set(HOST_LEVERS)):
        raise ValueError(f"host levers are {', '.join(HOST_LEVERS)}, not {', '.join(odd)}")
    return [
        Engine(profile, backend, pin == "on", off)
        for profile in profiles
        for backend in backends
        for pin in pins
        for off in sets
        if not (pin == "on" and backend in PINNED_BACKENDS)
    ]


def _speculative(profile: str) -> bool:
    return PROFILES[profile].speculative


@dataclass(frozen=True, slots=True)
class HostRound:
    """One engine's verify round on the profiled GPU, per round (milliseconds)."""

    profile: str
    backend: str
    """The attention backend (SGLang's `attention_backend`)."""
    pin: bool
    """Whether the FutureMap synchronized on the previous verify (as the scheduler decided)."""
    pin_forced: bool
    """The pin set by the script over the backends' own declaration."""
    rounds: int
    """Verify rounds the long request ran beyond the short one (the difference measured)."""
    accept_length: float | None
    wall_ms: float
    """Unprofiled: the long request's time less the short one's, over the rounds between."""
    gpu_busy_ms: float
    """Profiled: the time at least one GPU op ran, the same difference."""
    profiled_wall_ms: float
    """The profiled requests' wall time, the same difference: the profiler's own cost."""
    host_wait_ms: float
    """Unprofiled: the scheduler's time in explicit waits on the GPU (event, stream and
    device synchronizes)."""
    pin_ms: float
    """Unprofiled: the scheduler's time in `resolve_seq_lens_cpu` (the pin's wait included)."""
    off: tuple[str, ...] = ()
    """ling-chat's host levers turned off in this engine (HOST_LEVERS)."""
    gc_ms: float | None = None
    """Unprofiled: the scheduler's time in garbage collections (None: not counted)."""

    @property
    def idle_ms(self) -> float:
        """The GPU's idle time a round: what the host added to it."""
        return self.wall_ms - self.gpu_busy_ms

    @property
    def host_loop_ms(self) -> float:
        """The scheduler's time a round outside its explicit waits: its own work (implicit
        syncs, `.item()` and the like, count as work)."""
        return self.wall_ms - self.host_wait_ms

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostRound:
        """One row of a host-time file.

        Raises:
            ValueError: a missing or malformed field, in one line.
        """
        try:
            row = cls(
                profile=str(data["profile"]),
                backend=str(data["backend"]),
                pin=_bool(data["pin"], "pin"),
                pin_forced=_bool(data["pin_forced"], "pin_forced"),
                rounds=int(data["rounds"]),
                accept_length=None
                if data.get("accept_length") is None
                else float(data["accept_length"]),
                wall_ms=float(data["wall_ms"]),
                gpu_busy_ms=float(data["gpu_busy_ms"]),
                profiled_wall_ms=float(data["profiled_wall_ms"]),
                host_wait_ms=float(data["host_wait_ms"]),
                pin_ms=float(data["pin_ms"]),
                off=tuple(str(lever) for lever in data.get("off", ())),
                gc_ms=None if data.get("gc_ms") is None else float(data["gc_ms"]),
            )
        except KeyError as err:
            raise ValueError(f"a host-time row lacks {err}") from None
        except (TypeError, ValueError) as err:
            raise ValueError(f"a malformed host-time row: {err}") from None
        if row.rounds < 1:
            raise ValueError(f"{row.label}: rounds must be at least 1")
        if not all(math.isfinite(v) for v in (row.wall_ms, row.gpu_busy_ms, row.host_wait_ms)):
            raise ValueError(f"{row.label}: times must be finite")
        return row

    @property
    def label(self) -> str:
        """profile / backend / pin [/ off: levers], e.g. `stack/flashinfer/pin`."""
        pin = ("pin forced" if self.pin_forced else "pin") if self.pin else "no pin"
        off = f"/off: {'+'.join(self.off)}" if self.off else ""
        return f"{self.profile}/{self.backend}/{pin}{off}"


def _bool(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class HostRun:
    """A host-time file: the machine and every engine measured on it."""

    gpu: str
    cpu: str
    """The host CPU's model name, as /proc/cpuinfo gives it."""
    layers: int
    rows: tuple[HostRound, ...]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostRun:
        """A host-time file's JSON.

        Raises:
            ValueError: a missing or malformed field, no rows, or one engine twice.
        """
        try:
            rows = tuple(HostRound.from_dict(r) for r in data["rows"])
            run = cls(str(data["gpu"]), str(data["cpu"]), int(data["layers"]), rows)
        except KeyError as err:
            raise ValueError(f"the host-time file lacks {err}") from None
        except TypeError as err:
            raise ValueError(f"a malformed host-time file: {err}") from None
        if not rows:
            raise ValueError("the host-time file has no rows")
        labels = [r.label for r in rows]
        if len(set(labels)) < len(labels):
            raise ValueError(f"an engine is given twice: {sorted(labels)}")
        return run


def spark_host_ms(row: HostRound, spark_gpu_ms: float, cpu_factor: float) -> float:
    """The host time a Spark round adds to its projected GPU time `spark_gpu_ms`."""
    run_ahead = max(0.0, cpu_factor * row.host_loop_ms - spark_gpu_ms)
    if not row.pin:
        return run_ahead
    return max(cpu_factor * max(row.idle_ms, 0.0), run_ahead)


@dataclass(frozen=True, slots=True)
class HostTerm:
    """One engine's projected Spark round and TPOT with its host term."""

    label: str
    profile: str
    backend: str
    pin: bool
    accept_length: float
    gpu_round_ms: float
    """The projection's round: kernels' bytes at the fitted bandwidth."""
    host_ms: float
    round_ms: float
    tpot_ms: float
    tpot_without_host_ms: float
    h200_idle_ms: float
    h200_host_loop_ms: float


@dataclass(frozen=True, slots=True)
class HostProjection:
    """The host term of every measured engine whose profile the projection has a round of."""

    gpu: str
    cpu: str
    cpu_factor: float
    cpu_factor_why: str
    terms: tuple[HostTerm, ...]


def host_projection(
    run: HostRun,
    gpu_rounds_ms: Mapping[str, float],
    accepts: Mapping[str, float],
    *,
    cpu_factor: float = CPU_FACTOR,
    cpu_factor_why: str = CPU_FACTOR_WHY,
) -> HostProjection:
    """Each measured engine's Spark round: the projection's GPU round for its profile, at that
    profile's accept length, plus its host term.

    Raises:
        ValueError: a CPU factor that is not positive, or no measured profile with a round.
    """
    if not cpu_factor > 0:
        raise ValueError(f"the CPU factor must be positive, not {cpu_factor}")
    terms = []
    for row in run.rows:
        if row.profile not in gpu_rounds_ms or row.profile not in accepts:
            continue
        gpu_ms, accept = gpu_rounds_ms[row.profile], accepts[row.profile]
        host_ms = spark_host_ms(row, gpu_ms, cpu_factor)
        terms.append(
            HostTerm(
                label=row.label,
                profile=row.profile,
                backend=row.backend,
                pin=row.pin,
                accept_length=accept,
                gpu_round_ms=gpu_ms,
                host_ms=host_ms,
                round_ms=gpu_ms + host_ms,
                tpot_ms=(gpu_ms + host_ms) / accept,
                tpot_without_host_ms=gpu_ms / accept,
                h200_idle_ms=row.idle_ms,
                h200_host_loop_ms=row.host_loop_ms,
            )
        )
    if not terms:
        raise ValueError(
            f"no measured profile ({', '.join(sorted({r.profile for r in run.rows}))}) has a "
            f"projected round ({', '.join(sorted(gpu_rounds_ms))})"
        )
    return HostProjection(run.gpu, run.cpu, cpu_factor, cpu_factor_why, tuple(terms))


def host_table(run: HostRun) -> str:
    """Every measured engine's round on the profiled GPU: wall, GPU busy, idle, host loop."""
    w = max(len(r.label) for r in run.rows)
    lines = [
        f"MEASURED on {run.gpu} (host CPU {run.cpu}), {run.layers} layers, ms a verify round:",
        f"{'engine':<{w}} {'rounds':>6} {'accept':>6} {'wall':>7} {'GPU busy':>8} {'idle':>6} "
        f"{'host loop':>9} {'waits':>6} {'resolve':>7} {'profiled wall':>13} {'GC':>6}",
    ]
    for r in run.rows:
        accept = f"{r.accept_length:6.2f}" if r.accept_length is not None else f"{'-':>6}"
        gc = f"{r.gc_ms:6.3f}" if r.gc_ms is not None else f"{'-':>6}"
        lines.append(
            f"{r.label:<{w}} {r.rounds:6d} {accept} {r.wall_ms:7.3f} {r.gpu_busy_ms:8.3f} "
            f"{r.idle_ms:6.3f} {r.host_loop_ms:9.3f} {r.host_wait_ms:6.3f} {r.pin_ms:7.3f} "
            f"{r.profiled_wall_ms:13.3f} {gc}"
        )
    return "\n".join(lines)
