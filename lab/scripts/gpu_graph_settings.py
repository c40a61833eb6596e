"""What the recipe's batch-1-only decode graphs change at start: time and memory (GPU only).

Boots the `stack` profile on the known-answer test model twice: with ling-chat's settings
(graphs for batch 1, one running request) and with SGLang's own defaults for those three
settings. For each it prints the start's stages, every CUDA-graph capture SGLang logs (the
batch sizes, seconds and GB), the memory pool it sized, and the GPU memory in use.

    python lab/scripts/gpu_graph_settings.py OUT_DIR [--layers N] [--mem-fraction F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend  # noqa: E402
from tests.gpu import known_answer, models  # noqa: E402

SGLANG_DEFAULTS = {
    "cuda_graph_bs_decode": None,
    "cuda_graph_max_bs_decode": None,
    "max_running_requests": None,
}
"""The three recipe settings handed back to SGLang (None: SGLang's own default)."""

CAPTURE = re.compile(
    r"Capture (?P<what>[\w ]+?) CUDA graph end\. (?:bs=(?P<bs>\[[^\]]*\]), )?"
    r"elapsed=(?P<s>[\d.]+) s, mem usage=(?P<gb>[\d.]+) GB"
)
POOL = re.compile(r"(KV Cache is allocated\..*|Memory pool end\..*|max_running_requests=.*)")


def gpu_used_gib() -> float:
    import torch

    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def captures(log: str) -> list[dict[str, Any]]:
    """Every CUDA-graph capture SGLang logged: what, batch sizes, seconds, GB."""
    return [
        {"what": m["what"], "bs": m["bs"], "seconds": float(m["s"]), "gb": float(m["gb"])}
        for m in CAPTURE.finditer(log)
    ]


async def boot(name: str, model: Path, out: Path, overrides: dict[str, Any], frac: float) -> dict:
    config = EngineConfig(
        model_path=str(model),
        profile="stack",
        mem_fraction=frac,
        log_dir=out / name,
        min_accept_length=1.0,
        context_length=4096,
        overrides={"load_format": "dummy", "log_level": "info", **overrides},
    )
    backend = EngineBackend(config, scheduler_entry=known_answer.run_scheduler_process)
    stages: dict[str, float] = {}
    try:
        async for stage in backend.start():
            if stage.done:
                stages[stage.name] = round(stage.elapsed_s, 1)
        report = await backend.proof()
        used = gpu_used_gib()
    finally:
        await backend.shutdown()
    log = backend.log_file.read_text(errors="replace")
    return {
        "name": name,
        "overrides": overrides,
        "stages_s": stages,
        "proof": report.summary(),
        "gpu_used_gib_after_boot": round(used, 2),
        "captures": captures(log),
        "pool": sorted(set(POOL.findall(log))),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--mem-fraction", type=float, default=0.5)
    args = parser.parse_args()
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1"
    model = models.write_model_dir(args.out / "model", args.layers, known_answer=True)
    rows = []
    for name, overrides in (("batch-1 graphs", {}), ("SGLang defaults", SGLANG_DEFAULTS)):
        row = await boot(name, model, args.out, overrides, args.mem_fraction)
        rows.append(row)
        print(f"== {name} ({args.layers} layers): proof {row['proof']}", flush=True)
        print(
            f"  stages: {row['stages_s']}; GPU memory in use {row['gpu_used_gib_after_boot']} GiB"
        )
        for c in row["captures"]:
            print(f"  capture {c['what']}: bs={c['bs']} {c['seconds']:.2f} s, {c['gb']:.2f} GB")
        for line in row["pool"]:
            print(f"  {line[:200]}")
    (args.out / "graphs.json").write_text(json.dumps({"layers": args.layers, "rows": rows}))


if __name__ == "__main__":
    asyncio.run(main())
