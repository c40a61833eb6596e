"""Host time per verify round: wall time against GPU-busy time, per profile, attention backend
and host pin (GPU only).

Boots one engine at a time (42 layers of Ling-3.0-flash's shapes, known-answer weights, 2K
context) for each profile x attention backend x pin setting, and measures per verify round,
each as the long request's value less the short one's over the rounds between (prefill and
fixed costs cancel):
- wall time, unprofiled (median over --reps pairs of fresh prompts);
- the scheduler's explicit waits on the GPU and its time in the pin's resolve, unprofiled
  (lab/research/host_probe.py counts them inside the scheduler);
- GPU-busy time under the torch profiler (GPU activities only), and the profiled wall time
  beside the unprofiled one: the profiler's own cost.

Pin settings: `auto` is SGLang's own decision (Triton declares no CPU seq lens: no pin;
FlashInfer's MLA backend does not declare: pinned), `on` forces the pin for a backend that
declares none (skipped for FlashInfer, already pinned). FlashInfer without the pin cannot run:
its MLA metadata asserts the CPU seq lens at graph replay (lab/research/host-pin.md).

Rows are added to --json as each engine finishes (a row of the same engine is replaced), and
the table of every row so far is printed at the end. The `dspark` profile drafts with dummy
weights (tests/gpu/dspark_models.py): its accept length is about 1, its round the real one.

    python lab/scripts/gpu_host_time.py OUTDIR --json HOST.json [--profiles stack,dspark]
        [--backends triton,flashinfer] [--pins auto,on] [--layers 42] [--context 2048]
        [--tokens 16,128] [--reps 5] [--off ,prepared_commit,gc_freeze]

`--off` boots each engine once more for each set of ling-chat's host levers turned off (the
fed ReplaySSM commit, the GC freeze, the fast cores: lab/research/host_probe.py), so each
lever's round is measured against the engine with all of them, on one machine in one run;
every row also has the scheduler's time in garbage collections a round (`gc_ms`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gzip
import hashlib
import json
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_kernel_profile import GPU_CATEGORIES  # noqa: E402
from gpu_stack_ab import boot, busy_and_span  # noqa: E402

from app.backend.engine.engine import EngineBackend  # noqa: E402
from app.bench.engine_calls import call_tokenizer_manager, generate  # noqa: E402
from app.levers.profiles import PROFILES  # noqa: E402
from lab.research import host_probe  # noqa: E402
from lab.research.host_time import (  # noqa: E402
    PINNED_BACKENDS,
    Engine,
    HostRound,
    HostRun,
    engines,
    host_table,
)
from tests.gpu import dspark_models, known_answer, models  # noqa: E402

SETTLE_S = 3 * host_probe.WRITE_EVERY_S


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One greedy request's wall time, rounds and accept length, and the scheduler's waits."""

    wall_s: float
    tokens: int
    rounds: int
    accept: float | None
    wait_s: float
    resolve_s: float
    gc_s: float
    reply_sha: str
    """The reply text's SHA-256 (first 16 hex digits): equal across engines of one profile."""
    gpu_busy_us: float = 0.0


def prompt(seed: int, context: int) -> list[int]:
    return random.Random(seed).sample(range(1000, 150000), context)


async def request(
    backend: EngineBackend, stats: Path, tokens: int, seed: int, context: int
) -> Request:
    """One request, with the scheduler's counters read before and after it."""
    await asyncio.sleep(SETTLE_S)
    before = host_probe.HostStats.read(stats)
    sample = await generate(
        backend,
        input_ids=prompt(seed, context),
        sampling_params={"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True},
    )
    await asyncio.sleep(SETTLE_S)
    after = host_probe.HostStats.read(stats)
    usage = sample.usage
    return Request(
        wall_s=sample.ended_at - sample.started_at,
        tokens=tokens,
        rounds=usage.verify_rounds or usage.completion_tokens,
        accept=usage.accept_length,
        wait_s=after.wait_s - before.wait_s,
        resolve_s=after.resolve_s - before.resolve_s,
        gc_s=after.gc_s - before.gc_s,
        reply_sha=hashlib.sha256(sample.text.encode()).hexdigest()[:16],
    )


async def profiled(
    backend: EngineBackend, stats: Path, out: Path, tokens: int, seed: int, context: int
) -> Request:
    """One request under SGLang's torch profiler (GPU activities only): its GPU-busy time."""
    from sglang.srt.managers.io_struct import ProfileReq

    out.mkdir(parents=True, exist_ok=True)
    req = ProfileReq(output_dir=str(out), activities=["GPU"], with_stack=False, profile_prefix="h")
    await call_tokenizer_manager(backend, "start_profile", req)
    result = await request(backend, stats, tokens, seed, context)
    await call_tokenizer_manager(backend, "stop_profile")
    traces = sorted(out.rglob("*.trace.json.gz"), key=os.path.getmtime)
    with gzip.open(traces[-1]) as trace:
        events = json.load(trace)["traceEvents"]
    busy, _span = busy_and_span([e for e in events if e.get("cat") in GPU_CATEGORIES])
    return dataclasses.replace(result, gpu_busy_us=busy)


def per_round(short: Request, long: Request, value: str) -> float:
    """`value` of the long request less the short one's, in ms over the rounds between."""
    scale = 1e-3 if value == "gpu_busy_us" else 1e3
    return (getattr(long, value) - getattr(short, value)) * scale / (long.rounds - short.rounds)


async def measure(
    engine: Engine, model: Path, args: argparse.Namespace, run: dict[str, Any]
) -> None:
    """Boot `engine`, measure its rounds, add its row to the host-time file, shut it down (the
    row is saved first: a 42-layer shutdown has hung for minutes)."""
    out = args.out / engine.name
    out.mkdir(parents=True, exist_ok=True)
    stats = out / "host-stats.json"
    os.environ[host_probe.PIN_ENV] = "on" if engine.force_pin else "auto"
    os.environ[host_probe.STATS_ENV] = str(stats)
    os.environ[host_probe.OFF_ENV] = ",".join(engine.off)
    overrides: dict[str, Any] = {"attention_backend": engine.backend}
    if PROFILES[engine.profile].has("dspark"):
        draft = dspark_models.write_draft_dir(args.out / "draft", args.layers)
        overrides["speculative_draft_model_path"] = str(draft)
    started = time.perf_counter()
    backend = await boot(
        engine.name,
        engine.profile,
        model,
        args.out,
        args.mem_fraction,
        overrides,
        scheduler_entry=host_probe.run_scheduler_process,
    )
    boot_s = time.perf_counter() - started
    short_n, long_n = args.tokens
    try:
        for seed in range(2):  # warm-up: Triton's JIT and autotuning at this context
            await request(backend, stats, long_n, 100 + seed, args.context)
        pairs = []
        for rep in range(args.reps):  # fresh prompts: no prefix-cache hit
            short = await request(backend, stats, short_n, 1000 + 2 * rep, args.context)
            long = await request(backend, stats, long_n, 1001 + 2 * rep, args.context)
            pairs.append((short, long))
        p_short = await profiled(backend, stats, out / "short", short_n, 1, args.context)
        p_long = await profiled(backend, stats, out / "long", long_n, 2, args.context)
        scheduler = host_probe.HostStats.read(stats)
        save(args.json, run, row(engine, scheduler, pairs, (p_short, p_long), boot_s))
    finally:
        started = time.perf_counter()
        await backend.shutdown()
        print(f"  {engine.name}: shut down in {time.perf_counter() - started:.0f} s", flush=True)


def row(
    engine: Engine,
    scheduler: host_probe.HostStats,
    pairs: list[tuple[Request, Request]],
    profiled_pair: tuple[Request, Request],
    boot_s: float,
) -> dict[str, Any]:
    """The engine's row of the host-time file, its line printed."""
    if scheduler.pin is None:
        raise SystemExit(f"{engine.name}: the scheduler never decided on the pin")
    if len(scheduler.timed_waits) < 3:
        print(f"  {engine.name}: waits counted only in {scheduler.timed_waits}", flush=True)
    if scheduler.declared_pin != (engine.backend in PINNED_BACKENDS):
        print(
            f"  {engine.name}: SGLang declared pin={scheduler.declared_pin}, expected "
            f"{engine.backend in PINNED_BACKENDS} (see lab/research/host-pin.md)",
            flush=True,
        )

    def median(value: str) -> float:
        return statistics.median(per_round(s, lo, value) for s, lo in pairs)

    walls = [per_round(s, lo, "wall_s") for s, lo in pairs]
    p_short, p_long = profiled_pair
    host = HostRound(
        profile=engine.profile,
        backend=engine.backend,
        pin=scheduler.pin,
        # the script's setting: an engine forced on never shares its label with SGLang's own
        pin_forced=engine.force_pin,
        rounds=pairs[0][1].rounds - pairs[0][0].rounds,
        accept_length=pairs[0][1].accept,
        wall_ms=statistics.median(walls),
        gpu_busy_ms=per_round(p_short, p_long, "gpu_busy_us"),
        profiled_wall_ms=per_round(p_short, p_long, "wall_s"),
        host_wait_ms=median("wait_s"),
        pin_ms=median("resolve_s"),
        off=engine.off,
        gc_ms=median("gc_s"),
    )
    print(
        f"{host.label}: wall {host.wall_ms:.3f} ms a round (reps {min(walls):.3f}-"
        f"{max(walls):.3f}), GPU busy {host.gpu_busy_ms:.3f}, idle {host.idle_ms:.3f}, host loop "
        f"{host.host_loop_ms:.3f}, GC {host.gc_ms:.3f}; booted in {boot_s:.0f} s",
        flush=True,
    )
    return {
        **{name: getattr(host, name) for name in host.__dataclass_fields__},
        "declared_pin": scheduler.declared_pin,
        "timed_waits": scheduler.timed_waits,
        "wall_ms_reps": walls,
        "reply_sha": [long.reply_sha for _short, long in pairs],
        "tokens": [pairs[0][0].tokens, pairs[0][1].tokens],
        "boot_s": round(boot_s, 1),
    }


def cpu_model() -> str:
    """The host CPU's model name."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def save(path: Path, run: dict[str, Any], row: dict[str, Any]) -> None:
    """Add `row` to the file at `path` (replacing the same engine's), keeping its other rows."""
    label = HostRound.from_dict(row).label
    if path.exists():
        kept = json.loads(path.read_text())["rows"]
        run["rows"] = [r for r in kept if HostRound.from_dict(r).label != label]
    run["rows"].append(row)
    path.write_text(json.dumps(run, indent=1) + "\n")


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--profiles", default="stack,dspark")
    parser.add_argument("--backends", default="triton,flashinfer")
    parser.add_argument("--pins", default="auto,on")
    parser.add_argument(
        "--off",
        default="",
        help="host levers off, one engine per set: ',prepared_commit,gc_freeze' boots one with"
        " all on, one without the fed commit, one without the GC freeze; a+b: both off",
    )
    parser.add_argument("--layers", type=int, default=42)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--tokens", default="16,128", help="the short and the long request")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--mem-fraction", type=float, default=0.65)
    args = parser.parse_args()
    try:
        todo = engines(
            args.profiles.split(","),
            args.backends.split(","),
            args.pins.split(","),
            args.off.split(","),
        )
        args.tokens = tuple(int(n) for n in args.tokens.split(","))
        if len(args.tokens) != 2 or not 0 < args.tokens[0] < args.tokens[1]:
            raise ValueError(f"--tokens needs a short and a longer count, not {args.tokens}")
    except ValueError as err:
        parser.error(str(err))
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1"
    model = models.write_model_dir(args.out / "model", args.layers, known_answer=True)
    import torch

    for engine in todo:
        run = {
            "kind": "measurement",
            "note": "Per verify round, each value the long request's less the short one's over "
            "the rounds between: wall unprofiled, GPU busy under the torch profiler (GPU only), "
            "the scheduler's explicit waits on the GPU counted inside it. Known-answer weights "
            "(the dspark draft's dummy: accept about 1).",
            "gpu": torch.cuda.get_device_name(),
            "cpu": cpu_model(),
            "cpus": sorted(os.sched_getaffinity(0)),
            "layers": args.layers,
            "context_tokens": args.context,
            "reps": args.reps,
            "rows": [],
        }
        await measure(engine, model, args, run)
    print(host_table(HostRun.from_dict(json.loads(args.json.read_text()))))


if __name__ == "__main__":
    asyncio.run(main())
