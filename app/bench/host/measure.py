"""Measure a started engine's host time a round (`bench --host-time`), through the
benchmark's engine protocol: the in-process engine and the stock server alike."""

from __future__ import annotations

import random
import re
import statistics
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from app.bench.host.rounds import HostBoot, Timed, gpu_busy_us, per_round_ms
from app.bench.protocol import BenchEngine
from app.core.errors import BackendError

SEED = 10_000
"""The pairs' prompts are seeded apart from the workloads' (no prefix-cache hit)."""


@dataclass(frozen=True, slots=True)
class HostPlan:
    """What each boot sends: `pairs` short and long greedy requests of `context` fresh
    tokens, unprofiled; on an engine's first boot one more pair under the profiler, whose
    traces go under `folder`."""

    folder: Path
    context: int = 2048
    short: int = 16
    long: int = 256
    pairs: int = 3


def prompt(seed: int, context: int) -> list[int]:
    """`context` distinct token ids (below Ling's 157,184), the same for a seed."""
    return random.Random(seed).sample(range(1000, 150000), context)


async def timed(engine: BenchEngine, tokens: int, seed: int, context: int) -> Timed:
    """One greedy request of `tokens` tokens, its wall time and rounds."""
    sample = await engine.generate(
        input_ids=prompt(seed, context),
        prompt=None,
        sampling_params={"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True},
    )
    usage = sample.usage
    return Timed(
        sample.ended_at - sample.started_at, usage.verify_rounds or usage.completion_tokens
    )


async def profiled(
    engine: BenchEngine, folder: Path, tokens: int, seed: int, context: int
) -> tuple[Timed, float]:
    """One request under the engine's profiler (GPU activities): its timing and GPU-busy us."""
    folder.mkdir(parents=True, exist_ok=True)
    await engine.start_profile(folder)
    try:
        result = await timed(engine, tokens, seed, context)
    finally:
        await engine.stop_profile()
    traces = sorted(folder.rglob("*.trace.json*"), key=lambda p: p.stat().st_mtime)
    if not traces:
        raise BackendError(f"the profiler wrote no trace in {folder}")
    return result, gpu_busy_us(traces[-1])


async def measure(engine: BenchEngine, name: str, first: bool, plan: HostPlan) -> HostBoot:
    """This boot's round (profiled only when `first`); a failure is kept as its `error`."""
    try:
        walls, rounds = [], 0
        for pair in range(plan.pairs):
            seed = SEED + 2 * pair
            short = await timed(engine, plan.short, seed, plan.context)
            long = await timed(engine, plan.long, seed + 1, plan.context)
            rounds = long.rounds - short.rounds
            if (wall := per_round_ms(short, long)) is not None:
                walls.append(wall)
        if not first:
            return HostBoot(statistics.median(walls) if walls else None, tuple(walls), rounds)
        folder = plan.folder / re.sub(r"[^\w.+-]", "_", name)
        short, short_us = await profiled(
            engine, folder / "short", plan.short, SEED - 2, plan.context
        )
        long, long_us = await profiled(engine, folder / "long", plan.long, SEED - 1, plan.context)
        between = long.rounds - short.rounds
        return HostBoot(
            wall_ms=statistics.median(walls) if walls else None,
            wall_ms_pairs=tuple(walls),
            rounds=rounds,
            gpu_busy_ms=(long_us - short_us) / 1e3 / between if between > 0 else None,
            profiled_wall_ms=per_round_ms(short, long),
        )
    except (BackendError, OSError, ValueError, KeyError) as exc:
        return HostBoot(None, (), 0, error=f"{type(exc).__name__}: {exc}")


def probe(log_dir: Path, context: int) -> Callable[[BenchEngine, str, bool], Awaitable[HostBoot]]:
    """`bench --host-time`'s probe: pairs of `context` prompt tokens, traces under
    `log_dir`/host-time."""
    plan = HostPlan(folder=log_dir / "host-time", context=context)
    return lambda engine, name, first: measure(engine, name, first, plan)
