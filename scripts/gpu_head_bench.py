"""Microbenchmark of the LM head alone at M = 1..8 tokens, under CUDA graphs (GPU only).

Rows: BF16 matmul (SGLang's default head), FP32 logits (`enable_fp32_lm_head`: BF16
weight, FP32 output), SGLang's `Fp8LinearMethod.apply`, ling-chat's FP8 head method,
and cuBLASLt row-wise `torch._scaled_mm`, against the byte floor of each weight.

    python scripts/gpu_head_bench.py [--peak-gbps 4800] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VOCAB, HIDDEN = 157184, 2560
GRAPH_ITERS = 20
REPLAYS = 15


def graph_time_us(fn: Callable[[], Any]) -> float:
    """Median per-call time of `fn` captured GRAPH_ITERS times in one CUDA graph."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(GRAPH_ITERS):
            fn()
    samples = []
    for _ in range(REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / GRAPH_ITERS)
    return statistics.median(samples)


class HeadDouble(torch.nn.Module):
    """A stand-in for ParallelLMHead: just the weight the quant methods read and replace."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peak-gbps", type=float, default=4800.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from sglang.srt.layers.quantization.fp8 import Fp8Config, Fp8LinearMethod

    from app.backend.patches import fp8_head

    torch.manual_seed(0)
    weight = (torch.randn(VOCAB, HIDDEN, device="cuda") * 0.02).to(torch.bfloat16)
    sgl_head, ling_head = HeadDouble(weight), HeadDouble(weight)
    sgl = Fp8LinearMethod(Fp8Config(is_checkpoint_fp8_serialized=False))
    sgl.process_weights_after_loading(sgl_head)
    ling = fp8_head.new_method()
    ling.process_weights_after_loading(ling_head)
    rowwise_w = ling_head.weight  # [K, N] column-major FP8, per-channel scales
    rowwise_scale = ling_head.weight_scale.float()  # [1, N]
    bf16_bytes = weight.numel() * 2
    fp8_bytes = weight.numel() + VOCAB * 4
    rows: list[dict[str, Any]] = []
    for m in range(1, 9):
        x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        x_scale = torch.ones(m, 1, device="cuda")
        x8 = x.to(torch.float8_e4m3fn)
        paths: dict[str, tuple[Callable[[], Any], int]] = {
            "bf16": (lambda x=x: x @ weight.t(), bf16_bytes),
            "fp32-logits": (
                lambda x=x: torch.mm(x, weight.t(), out_dtype=torch.float32),
                bf16_bytes,
            ),
            "sglang-fp8": (lambda x=x: sgl.apply(sgl_head, x), fp8_bytes),
            "ling-fp8": (lambda x=x: ling.apply(ling_head, x), fp8_bytes),
            "scaled_mm-rowwise": (
                lambda x8=x8, s=x_scale: torch._scaled_mm(
                    x8, rowwise_w, scale_a=s, scale_b=rowwise_scale, out_dtype=torch.bfloat16
                ),
                fp8_bytes,
            ),
        }
        for name, (fn, nbytes) in paths.items():
            try:
                us = graph_time_us(fn)
            except Exception as exc:  # one broken path must not hide the others
                print(f"M={m} {name}: {type(exc).__name__}: {exc}")
                us = float("nan")
            floor = nbytes / (args.peak_gbps * 1e9) * 1e6
            rows.append({"m": m, "path": name, "us": round(us, 1), "floor_us": round(floor, 1)})
    print(
        f"LM head {VOCAB} x {HIDDEN} on {torch.cuda.get_device_name()}, CUDA graphs, "
        f"median of {REPLAYS} replays x {GRAPH_ITERS} calls; floor at {args.peak_gbps} GB/s"
    )
    names = list(dict.fromkeys(r["path"] for r in rows))
    print(f"{'M':>2} " + " ".join(f"{n:>18}" for n in names))
    for m in range(1, 9):
        cells = {r["path"]: r["us"] for r in rows if r["m"] == m}
        print(f"{m:>2} " + " ".join(f"{cells[n]:>15.1f} us" for n in names))
    floors = {r["path"]: r["floor_us"] for r in rows if r["m"] == 1}
    print("floor " + " ".join(f"{floors[n]:>15.1f} us" for n in names))
    if args.json:
        args.json.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}))


if __name__ == "__main__":
    main()
