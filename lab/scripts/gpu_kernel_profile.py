"""GPU kernels of one decode step or one NEXTN verify round, per profile (GPU only).

Boots one engine per profile on a Ling-3.0-flash-shaped model (42 layers by default),
profiles two greedy requests of different lengths in SGLang's scheduler (torch
profiler), and writes the difference per step or round: every kernel with its calls and
GPU time, without the prefill both requests share. The rounds are the target forwards the
difference ran, counted from its KDA kernels
(`app.bench.bytemodel.kernels.target_forwards`). The files feed
`lab/scripts/spark_projection.py` and `lab/scripts/depth_eval.py`.

`--steps 2,4,3` boots each NEXTN profile once a depth (speculative_num_steps K, K + 1 draft
tokens, top-1; a ReplaySSM verify with the shortest ring SGLang accepts for that window) and
writes kernels-PROFILE-LAYERS-kK.json. The proof's NEXTN line then fails (it holds the
product to 3/1/4): it is printed, and the profile goes on. Each verify file says whether its
round ran ReplaySSM ("replayssm"). The `dspark` profile drafts with a DSpark model of the
real draft's shapes and dummy weights (tests/gpu/dspark_models.py): its accept length is
about 1, its round is the real one.

    python lab/scripts/gpu_kernel_profile.py OUTDIR --profiles humming+fp8,stack [--layers 42]
        [--known-answer] [--context 2048] [--mem-fraction 0.65] [--steps 2,4,3]
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_stack_ab import boot  # noqa: E402

from app.backend.engine.engine import EngineBackend  # noqa: E402
from app.bench.bytemodel.checkpoint import ModelShape  # noqa: E402
from app.bench.bytemodel.kernels import KernelRecord, target_forwards  # noqa: E402
from app.bench.engine_calls import call_tokenizer_manager, generate  # noqa: E402
from app.levers.profiles import PROFILES
from lab.research.profile_runs import ProfileRun, profile_runs  # noqa: E402
from tests.gpu import dspark_models, known_answer, models  # noqa: E402

SHORT, LONG = 8, 72
NAME_CHARS = 200
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


async def profiled_request(
    backend: EngineBackend, out: Path, tokens: int, context: int, seed: int
) -> tuple[Counter[str], Counter[str], int, float | None]:
    """GPU time and calls by kernel name over one request, its rounds and accept length."""
    from sglang.srt.managers.io_struct import ProfileReq

    out.mkdir(parents=True, exist_ok=True)
    prompt = random.Random(seed).sample(range(1000, 150000), context)
    await call_tokenizer_manager(
        backend,
        "start_profile",
        ProfileReq(output_dir=str(out), activities=["GPU"], with_stack=False, profile_prefix="k"),
    )
    sample = await generate(
        backend,
        input_ids=prompt,
        sampling_params={"max_new_tokens": tokens, "temperature": 0.0, "ignore_eos": True},
    )
    await call_tokenizer_manager(backend, "stop_profile")
    usage = sample.usage
    rounds = usage.verify_rounds or usage.completion_tokens
    traces = sorted(out.rglob("*.trace.json.gz"), key=os.path.getmtime)
    with gzip.open(traces[-1]) as trace:
        events = json.load(trace)["traceEvents"]
    us: Counter[str] = Counter()
    calls: Counter[str] = Counter()
    for event in events:
        if event.get("cat") in GPU_CATEGORIES:
            name = event["name"][:NAME_CHARS]
            us[name] += event.get("dur", 0)
            calls[name] += 1
    return us, calls, rounds, usage.accept_length


async def profile_one(
    run: ProfileRun, model: Path, out: Path, args: argparse.Namespace
) -> dict[str, Any]:
    overrides = dict(run.overrides)
    if PROFILES[run.profile].has("dspark"):
        draft = dspark_models.write_draft_dir(args.out / "draft", args.layers)
        overrides["speculative_draft_model_path"] = str(draft)
    started = time.perf_counter()
    backend = await boot(run.name, run.profile, model, out, args.mem_fraction, overrides)
    boot_s = time.perf_counter() - started
    try:
        for seed in range(2):  # warm-up: Triton's JIT and autotuning at this context
            await generate(
                backend,
                input_ids=random.Random(100 + seed).sample(range(1000, 150000), args.context),
                sampling_params={"max_new_tokens": LONG, "temperature": 0.0, "ignore_eos": True},
            )
        short = await profiled_request(backend, out / "short", SHORT, args.context, 1)
        long = await profiled_request(backend, out / "long", LONG, args.context, 2)
    finally:
        await backend.shutdown()
    names = set(long[0]) | set(short[0])
    kernels = []
    for name in names:
        calls = long[1][name] - short[1][name]
        total = long[0][name] - short[0][name]
        if calls > 0 and total > 0:
            kernels.append({"name": name, "calls": calls, "total_us": round(total, 3)})
    sglang_rounds = long[2] - short[2]
    shape = ModelShape.from_config(json.loads((model / "config.json").read_text()))
    records = [KernelRecord(k["name"], k["calls"], k["total_us"]) for k in kernels]
    try:  # the units the GPU ran: SGLang's verify count was one off at depths 2, 4 and 5
        rounds = target_forwards(records, len(shape.kda_layers))
    except ValueError as err:
        raise SystemExit(f"{run.name}: {err}") from None
    kernels.sort(key=lambda k: -k["total_us"])
    result = {
        "gpu": _gpu_name(),
        "layers": args.layers,
        "profile": run.profile,
        "phase": "verify" if long[3] is not None else "decode",
        "rounds": rounds,
        **({"sglang_rounds": sglang_rounds} if sglang_rounds != rounds else {}),
        "accept_length": long[3],
        "context_tokens": args.context,
        "known_answer": args.known_answer,
        "boot_s": round(boot_s, 1),
        "kernels": kernels,
    }
    if run.depth is not None:
        result["draft_steps"] = run.depth
    if result["phase"] == "verify":
        result["replayssm"] = run.replayssm
    per_round = sum(k["total_us"] for k in kernels) / rounds
    launches = sum(k["calls"] for k in kernels) / rounds
    print(
        f"{run.name}: {result['phase']} {per_round / 1000:.3f} ms GPU time per round over "
        f"{rounds} rounds (SGLang counted {sglang_rounds}), {launches:.0f} kernels a round, "
        f"accept {long[3]}; booted in {boot_s:.0f} s",
        flush=True,
    )
    for kernel in kernels[:12]:
        print(
            f"    {kernel['total_us'] / rounds:9.1f} us  {kernel['calls'] / rounds:6.1f}x"
            f"  {kernel['name'][:100]}"
        )
    return result


def _gpu_name() -> str:
    import torch

    return str(torch.cuda.get_device_name())


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--profiles", default="humming+fp8,stack")
    parser.add_argument("--layers", type=int, default=42)
    parser.add_argument("--known-answer", action="store_true")
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--mem-fraction", type=float, default=0.65)
    parser.add_argument("--steps", default="", help="NEXTN depths, e.g. 2,4,3")
    args = parser.parse_args()
    try:
        steps = [int(k) for k in args.steps.split(",") if k.strip()]
        runs = profile_runs(args.profiles.split(","), args.layers, steps)
    except ValueError as err:
        parser.error(str(err))
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1" if args.known_answer else "0"
    model = models.write_model_dir(args.out / "model", args.layers, known_answer=args.known_answer)
    for run in runs:  # each file as soon as it is measured: a cut run keeps the ones before
        result = await profile_one(run, model, args.out / run.name, args)
        (args.out / run.file_name).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
