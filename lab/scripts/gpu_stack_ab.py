"""Side-by-side A/B of the NEXTN stack with the BF16 head and with the FP8 head (GPU only).

The two are humming+nextn and stack-recurrent, both with SGLang's recurrent KDA verify: the
head is all they differ in.

Both engines live in one process at once and take turns request by request, so
machine drift hits both alike. Per configuration: median and spread of the time to
generate N greedy tokens, accept length, and (with --profile) the GPU kernel time by
kernel name over one profiled request, to show where the FP8 head costs time.

    python lab/scripts/gpu_stack_ab.py OUTDIR [--known-answer] [--layers 6] [--reps 12] [--profile]
                                          [--fp8-first] [--pin-engines 4,5]

Rounds of this small model are host-bound, and two engine processes on one machine have
differed in host speed by up to 1.45x in Python code that never touches the head. Boot in
both orders (--fp8-first), pin the run to fixed cores (`taskset -c 2-9 python ...`), and put
both engines' SGLang processes on the same cores (--pin-engines: they take turns, so they
never compete) before reading a difference of a few percent as the head's.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psutil  # noqa: E402

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend  # noqa: E402
from app.bench.engine_calls import call_tokenizer_manager, generate  # noqa: E402
from tests.gpu import known_answer, models  # noqa: E402

CONFIGS = {"bf16-head": "humming+nextn", "fp8-head": "stack-recurrent"}
CORE_SAMPLE_S = 0.01
BOOTSTRAP = 2000


class HostUsage:
    """CPU time, involuntary context switches and cores of one engine's SGLang processes.

    A scheduler that shares its core with a busy neighbour is switched out involuntarily
    and runs everything slower: this is what tells placement apart from the FP8 path.
    """

    def __init__(self, pids: list[int]) -> None:
        self.procs = [psutil.Process(pid) for pid in pids]
        self.cpu_s = 0.0
        self.involuntary = 0
        self.cores: Counter[int] = Counter()
        self.idle_cpu_s = 0.0  # while the other engine was generating

    def _totals(self) -> tuple[float, int]:
        cpu, involuntary = 0.0, 0
        for proc in self.procs:
            times = proc.cpu_times()
            cpu += times.user + times.system
            involuntary += proc.num_ctx_switches().involuntary
        return cpu, involuntary

    async def _sample_cores(self) -> None:
        while True:
            for proc in self.procs:
                if proc.cpu_percent() > 0:  # since the last sample: the busy ones only
                    self.cores[proc.cpu_num()] += 1
            await asyncio.sleep(CORE_SAMPLE_S)

    async def measure(self, request: Any, idle: list[HostUsage]) -> Any:
        """Await `request`, adding the CPU time and switches it cost to the totals, and
        the CPU time the `idle` engines spent meanwhile to theirs."""
        cpu, involuntary = self._totals()
        idle_cpu = [other._totals()[0] for other in idle]
        sampler = asyncio.ensure_future(self._sample_cores())
        try:
            return await request
        finally:
            sampler.cancel()
            cpu_after, involuntary_after = self._totals()
            self.cpu_s += cpu_after - cpu
            self.involuntary += involuntary_after - involuntary
            for other, before in zip(idle, idle_cpu, strict=True):
                other.idle_cpu_s += other._totals()[0] - before

    def summary(self, rounds: int) -> dict[str, Any]:
        """Per verify round: CPU ms and involuntary switches; the cores seen busy."""
        return {
            "pids": [proc.pid for proc in self.procs],
            "cpu_ms_per_round": self.cpu_s * 1000 / rounds,
            "involuntary_switches_per_round": self.involuntary / rounds,
            "busy_core_samples": dict(self.cores.most_common()),
            "idle_cpu_ms_total": self.idle_cpu_s * 1000,
            "threads": {proc.pid: proc.num_threads() for proc in self.procs},
            "affinity": {proc.pid: thread_affinities(proc) for proc in self.procs},
        }


def pin(procs: list[psutil.Process], cpus: set[int]) -> None:
    """Every thread of `procs` on `cpus` (an affinity is per thread; new ones inherit it)."""
    for proc in procs:
        for thread in proc.threads():
            os.sched_setaffinity(thread.id, cpus)


def thread_affinities(proc: psutil.Process) -> list[list[int]]:
    """The distinct CPU sets of a process's threads."""
    found = {tuple(sorted(os.sched_getaffinity(thread.id))) for thread in proc.threads()}
    return [list(cpus) for cpus in sorted(found)]


def cpu_topology() -> dict[str, Any]:
    """This process's allowed CPUs, each with its physical core and NUMA node, and the
    cgroup's CPU quota: to tell hyper-thread siblings and a throttled container apart."""
    cpus: dict[int, str] = {}
    for cpu in sorted(os.sched_getaffinity(0)):
        topo = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cpus[cpu] = (topo / "thread_siblings_list").read_text().strip()
        except OSError:
            cpus[cpu] = "?"
    quota = Path("/sys/fs/cgroup/cpu.max")
    return {
        "allowed_cpu_siblings": cpus,
        "cgroup_cpu_max": quota.read_text().strip() if quota.exists() else None,
        "os_cpu_count": os.cpu_count(),
    }


def new_children(before: set[int]) -> list[int]:
    """Processes of this one started since `before` was taken (one engine's SGLang)."""
    return sorted({p.pid for p in psutil.Process().children(recursive=True)} - before)


async def boot(
    name: str,
    profile: str,
    model: Path,
    out: Path,
    mem_fraction: float,
    overrides: dict[str, Any] | None = None,
    scheduler_entry: Callable[..., None] = known_answer.run_scheduler_process,
) -> EngineBackend:
    """A dummy-weight engine of `profile`, its proof printed (a failing line does not stop
    it); `overrides` are server arguments over the profile's; `scheduler_entry` a module-level
    function wrapping the known-answer entry."""
    config = EngineConfig(
        model_path=str(model),
        profile=profile,
        mem_fraction=mem_fraction,
        log_dir=out / name,
        min_accept_length=1.0,
        context_length=4096,
        overrides={"load_format": "dummy", **(overrides or {})},
    )
    backend = EngineBackend(config, scheduler_entry=scheduler_entry)
    async for stage in backend.start():
        if stage.done:
            print(f"  {name}: {stage.name} done at {stage.elapsed_s:.0f}s", flush=True)
    report = await backend.proof()
    print(f"  {name}: proof {report.summary()}", flush=True)
    for line in report.lines:
        print(f"    {line.verdict.value:4} {line.key}: {line.evidence}", flush=True)
    return backend


async def one(backend: EngineBackend, tokens: int) -> tuple[float, float | None, int]:
    """Seconds for `tokens` greedy tokens, the accept length, and the decode rounds."""
    sample = await generate(
        backend,
        input_ids=list(range(1000, 1200)),
        sampling_params={"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True},
    )
    usage = sample.usage
    rounds = usage.verify_rounds or usage.completion_tokens
    return sample.ended_at - sample.started_at, usage.accept_length, rounds


async def profile(
    backend: EngineBackend, out: Path, tokens: int, *, with_stack: bool
) -> dict[str, Any]:
    """One request under SGLang's torch profiler (in the scheduler process), summarised.

    Without the Python stack: GPU time by kernel, runtime calls, and how busy the GPU was
    over the request. With it: where the scheduler's host time goes, by Python function
    (inclusive times, inflated by the tracing itself; compare shares, not absolutes).
    """
    from sglang.srt.managers.io_struct import ProfileReq

    out.mkdir(parents=True, exist_ok=True)
    req = ProfileReq(
        output_dir=str(out),
        activities=["GPU", "CPU"],
        with_stack=with_stack,
        record_shapes=False,
        profile_prefix="ab",
    )
    await call_tokenizer_manager(backend, "start_profile", req)
    seconds, _accept, rounds = await one(backend, tokens)
    await call_tokenizer_manager(backend, "stop_profile")
    traces = sorted(out.rglob("*.trace.json.gz"), key=os.path.getmtime)
    with gzip.open(traces[-1]) as trace:
        events = json.load(trace)["traceEvents"]
    gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    summary: dict[str, Any] = {"request_ms": seconds * 1000, "rounds": rounds}
    if with_stack:
        python = _after_prefill([e for e in events if e.get("cat") == "python_function"])
        summary["python_ms"] = _top((e["name"][:110], e.get("dur", 0)) for e in python)
        summary["python_self_ms"] = _top(_self_times(python))
        return summary
    busy, span = busy_and_span(gpu)
    summary.update(
        gpu_busy_ms=busy / 1000,
        gpu_span_ms=span / 1000,
        kernel_us=dict(_sum(gpu)),
        kernel_calls=dict(Counter(e["name"][:90] for e in gpu)),
        runtime_calls=dict(Counter(e["name"] for e in events if e.get("cat") == "cuda_runtime")),
    )
    return summary


def _sum(events: list[dict[str, Any]]) -> Counter[str]:
    total: Counter[str] = Counter()
    for e in events:
        total[e["name"][:90]] += e.get("dur", 0)
    return total


def _top(pairs: Any, n: int = 40) -> dict[str, list[float]]:
    """The n names with the most total time: [total ms, calls]."""
    total: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for name, dur in pairs:
        total[name] += dur
        calls[name] += 1
    return {name: [us / 1000, calls[name]] for name, us in total.most_common(n)}


def _after_prefill(python: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Python events that start after the (eager) prefill ended: the decode rounds only."""
    prefill_end = max(
        (e["ts"] + e.get("dur", 0) for e in python if "_forward_prefill_batch" in e["name"]),
        default=0,
    )
    return [e for e in python if e["ts"] >= prefill_end]


def _self_times(python: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(name, self time) per event: its duration less its direct children's."""
    children: Counter[Any] = Counter()
    for e in python:
        parent = e.get("args", {}).get("Python parent id")
        if parent is not None:
            children[parent] += e.get("dur", 0)
    return [
        (e["name"][:110], e.get("dur", 0) - children[e.get("args", {}).get("Python id")])
        for e in python
    ]


def busy_and_span(gpu: list[dict[str, Any]]) -> tuple[float, float]:
    """Microseconds with at least one GPU op running, and from the first op to the last."""
    spans = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in gpu)
    if not spans:
        return 0.0, 0.0
    busy, (start, end) = 0.0, spans[0]
    for a, b in spans[1:]:
        if a > end:
            busy += end - start
            start, end = a, b
        else:
            end = max(end, b)
    busy += end - start
    return busy, spans[-1][1] - spans[0][0]


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--known-answer", action="store_true")
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--mem-fraction", type=float, default=0.3, help="per engine")
    parser.add_argument("--fp8-first", action="store_true", help="boot the FP8-head engine first")
    parser.add_argument(
        "--pin-engines",
        type=lambda text: {int(cpu) for cpu in text.split(",")},
        metavar="CPUS",
        help="run both engines' SGLang processes on these cores, e.g. 4,5",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1" if args.known_answer else "0"
    model = models.write_model_dir(args.out / "model", args.layers, known_answer=args.known_answer)
    backends, hosts = {}, {}
    boot_order = sorted(CONFIGS, key=lambda n: n != "fp8-head") if args.fp8_first else CONFIGS
    for name in boot_order:
        before = {p.pid for p in psutil.Process().children(recursive=True)}
        backends[name] = await boot(name, CONFIGS[name], model, args.out, args.mem_fraction)
        hosts[name] = HostUsage(new_children(before))
        if args.pin_engines:
            pin(hosts[name].procs, args.pin_engines)
    times: dict[str, list[float]] = {name: [] for name in backends}
    accepts: dict[str, list[float]] = {name: [] for name in backends}
    rounds: Counter[str] = Counter()
    for backend in backends.values():  # warm-up: Triton JIT, caches
        for _ in range(2):
            await one(backend, args.tokens)
    for rep in range(args.reps):
        order = list(backends) if rep % 2 == 0 else list(reversed(backends))
        for name in order:
            idle = [hosts[other] for other in backends if other != name]
            seconds, accept, verify_rounds = await hosts[name].measure(
                one(backends[name], args.tokens), idle
            )
            rounds[name] += verify_rounds
            times[name].append(seconds * 1000)
            if accept is not None:
                accepts[name].append(accept)
    result: dict[str, Any] = {
        "tokens": args.tokens,
        "reps": args.reps,
        "layers": args.layers,
        "known_answer": args.known_answer,
        "boot_order": list(backends),
        "engine_cpus": sorted(args.pin_engines) if args.pin_engines else None,
        "cpu_topology": cpu_topology(),
        "configs": {},
    }
    print(f"CPU topology: {result['cpu_topology']}")
    print(
        f"\n{args.layers} layers, {args.tokens} greedy tokens, {args.reps} interleaved reps, "
        f"{'known-answer' if args.known_answer else 'random'} weights"
    )
    for name in backends:
        ms = times[name]
        row = {
            "median_ms": statistics.median(ms),
            "min_ms": min(ms),
            "max_ms": max(ms),
            "accept": statistics.median(accepts[name]) if accepts[name] else None,
            "ms": ms,
            "host_usage": hosts[name].summary(max(rounds[name], 1)),
        }
        result["configs"][name] = row
        usage = row["host_usage"]
        print(
            f"  {name:10} median {row['median_ms']:7.1f} ms  (min {row['min_ms']:.1f}, "
            f"max {row['max_ms']:.1f})  accept {row['accept']}\n"
            f"             SGLang processes {usage['pids']}: "
            f"{usage['cpu_ms_per_round']:.2f} ms CPU and "
            f"{usage['involuntary_switches_per_round']:.2f} involuntary switches per round; "
            f"busy on cores {usage['busy_core_samples']}; "
            f"{usage['idle_cpu_ms_total']:.0f} ms CPU in all while the other engine ran"
        )
    a, b = (result["configs"][n]["median_ms"] for n in ("bf16-head", "fp8-head"))
    result["fp8_speedup"] = a / b
    paired = paired_speedup(times["bf16-head"], times["fp8-head"])
    result["fp8_speedup_paired"] = paired
    print(
        f"  FP8 head vs BF16 head: {a / b:.3f}x by medians; per rep (the two requests of a rep "
        f"ran back to back) median {paired['median']:.3f}x, 95% CI {paired['ci95'][0]:.3f}"
        f"-{paired['ci95'][1]:.3f}x"
    )
    saved = args.out / "ab.json"
    saved.write_text(json.dumps(result, indent=1))  # kept if what follows is cut
    if args.profile:
        for name, backend in backends.items():
            row = result["configs"][name]
            row["profile"] = await profile(backend, args.out / f"prof-{name}", 64, with_stack=False)
            row["host"] = await profile(backend, args.out / f"stack-{name}", 64, with_stack=True)
        diff_kernels(result)
        host_time(result)
        saved.write_text(json.dumps(result, indent=1))
    for name, backend in backends.items():
        started = time.perf_counter()
        await backend.shutdown()  # an 18-layer run went silent for 4 minutes after its timings
        print(f"{name} shut down in {time.perf_counter() - started:.1f} s", flush=True)


def paired_speedup(bf16_ms: list[float], fp8_ms: list[float]) -> dict[str, Any]:
    """Median of the per-rep ratios BF16 / FP8, with a bootstrap 95% interval.

    The two requests of a rep run back to back, so drift of the machine over the run
    cancels in their ratio; the interval says whether the reps resolve the difference.
    """
    ratios = [b / f for b, f in zip(bf16_ms, fp8_ms, strict=True)]
    draws = random.Random(0)
    medians = sorted(
        statistics.median(draws.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP)
    )
    low, high = medians[int(0.025 * BOOTSTRAP)], medians[int(0.975 * BOOTSTRAP) - 1]
    return {"median": statistics.median(ratios), "ci95": [low, high], "ratios": ratios}


def diff_kernels(result: dict[str, Any]) -> None:
    """Print the kernels whose GPU time differs most between the two configurations."""
    a = result["configs"]["bf16-head"]["profile"]
    b = result["configs"]["fp8-head"]["profile"]
    names = set(a["kernel_us"]) | set(b["kernel_us"])
    rows = sorted(names, key=lambda n: -abs(b["kernel_us"].get(n, 0) - a["kernel_us"].get(n, 0)))
    total_a, total_b = sum(a["kernel_us"].values()), sum(b["kernel_us"].values())
    print(
        f"\nGPU kernel time over one 64-token request: bf16-head {total_a / 1000:.1f} ms, "
        f"fp8-head {total_b / 1000:.1f} ms"
    )
    print(f"{'kernel':90} {'bf16 us':>9} {'n':>5} {'fp8 us':>9} {'n':>5}")
    for n in rows[:25]:
        print(
            f"{n:90} {a['kernel_us'].get(n, 0):9.0f} {a['kernel_calls'].get(n, 0):5} "
            f"{b['kernel_us'].get(n, 0):9.0f} {b['kernel_calls'].get(n, 0):5}"
        )
    for name in ("bf16-head", "fp8-head"):
        p = result["configs"][name]["profile"]
        print(
            f"{name}: {p['rounds']} rounds in {p['request_ms']:.1f} ms "
            f"({p['request_ms'] / p['rounds']:.2f} ms/round); GPU busy {p['gpu_busy_ms']:.1f} ms "
            f"({p['gpu_busy_ms'] / p['rounds']:.2f} ms/round) of a {p['gpu_span_ms']:.1f} ms span"
        )
    for key in ("cudaGraphLaunch", "cudaLaunchKernel", "cuLaunchKernel", "cudaMemcpyAsync"):
        print(f"{key}: bf16 {a['runtime_calls'].get(key, 0)}  fp8 {b['runtime_calls'].get(key, 0)}")


def host_time(result: dict[str, Any]) -> None:
    """Print where the scheduler's host time went per decode round, by Python function."""
    for name in ("bf16-head", "fp8-head"):
        host = result["configs"][name]["host"]
        rounds = host["rounds"]
        print(
            f"\n{name}, traced with Python stacks: {host['request_ms']:.1f} ms, {rounds} rounds "
            "(times from the end of the prefill on)"
        )
        print(f"{'python function (inclusive)':110} {'ms/round':>9} {'calls':>6}")
        for fn, (ms, calls) in host["python_ms"].items():
            print(f"{fn:110} {ms / rounds:9.3f} {calls:6.0f}")
        print(f"{'python function (self)':110} {'ms/round':>9} {'calls':>6}")
        for fn, (ms, calls) in host["python_self_ms"].items():
            print(f"{fn:110} {ms / rounds:9.3f} {calls:6.0f}")


if __name__ == "__main__":
    asyncio.run(main())
