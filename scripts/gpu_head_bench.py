"""Microbenchmark of the LM head alone at M = 1..8 tokens, under CUDA graphs (GPU only).

Rows: BF16 matmul (SGLang's default head), FP32 logits (`enable_fp32_lm_head`: BF16
weight, FP32 output), SGLang's `Fp8LinearMethod.apply`, and every candidate kernel the
FP8 head picks from at load (app/backend/patches/fp8_head.py: SGLang's CUTLASS path,
cuBLASLt row-wise `torch._scaled_mm`, the Triton GEMV in each tiling), each against the
byte floor of its weight at the nominal peak, at the copy bandwidth measured here, and at
the read bandwidth of a full reduction over the FP8 head's own bytes (what a kernel that
only streams the weight can reach here).

    python scripts/gpu_head_bench.py [--peak-gbps 4800] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VOCAB, HIDDEN = 157184, 2560


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
    from app.backend.patches.head_choice import floor_us

    torch.manual_seed(0)
    weight = (torch.randn(VOCAB, HIDDEN, device="cuda") * 0.02).to(torch.bfloat16)
    sgl_head, ling_head = HeadDouble(weight), HeadDouble(weight)
    sgl = Fp8LinearMethod(Fp8Config(is_checkpoint_fp8_serialized=False))
    sgl.process_weights_after_loading(sgl_head)
    ling = fp8_head.new_method()
    ling.process_weights_after_loading(ling_head)
    kernels = fp8_head.candidates(ling_head)
    bf16_bytes = weight.numel() * 2
    fp8_bytes = weight.numel() + VOCAB * 4
    copy_gbps = fp8_head.copy_gbps()
    weight_words = ling_head.weight.t().view(torch.int32)  # the [N, K] FP8 rows, 4 a word
    read_us = fp8_head.graph_time_us(lambda: weight_words.amax())
    read_gbps = weight.numel() / (read_us * 1e3)
    rows: list[dict[str, Any]] = []
    for m in range(1, 9):
        x = torch.randn(m, HIDDEN, device="cuda", dtype=torch.bfloat16)
        reference = (x @ weight.t()).float()
        paths: dict[str, tuple[Callable[[], Any], int]] = {
            "bf16": (lambda x=x: x @ weight.t(), bf16_bytes),
            "fp32-logits": (
                lambda x=x: torch.mm(x, weight.t(), out_dtype=torch.float32),
                bf16_bytes,
            ),
            "sglang-fp8": (lambda x=x: sgl.apply(sgl_head, x), fp8_bytes),
        }
        for kernel in kernels:
            if kernel.max_m is None or m <= kernel.max_m:
                paths[kernel.name] = (lambda x=x, k=kernel: k.run(x), fp8_bytes)
        for name, (fn, nbytes) in paths.items():
            cosine = None
            try:
                us = fp8_head.graph_time_us(fn)
                out = fn().float()
                cosine = torch.nn.functional.cosine_similarity(out, reference, dim=-1).min().item()
            except Exception as exc:  # one broken path must not hide the others
                print(f"M={m} {name}: {type(exc).__name__}: {str(exc)[:200]}")
                us = float("nan")
            rows.append(
                {
                    "m": m,
                    "path": name,
                    "us": round(us, 1),
                    "floor_us": round(floor_us(nbytes, args.peak_gbps), 1),
                    "copy_floor_us": round(floor_us(nbytes, copy_gbps), 1),
                    "read_floor_us": round(floor_us(nbytes, read_gbps), 1),
                    "cosine_min": None if cosine is None else round(cosine, 5),
                }
            )
    print(
        f"LM head {VOCAB} x {HIDDEN} on {torch.cuda.get_device_name()}, CUDA graphs; floor at "
        f"{args.peak_gbps:.0f} GB/s peak / {copy_gbps:.0f} GB/s measured copy bandwidth / "
        f"{read_gbps:.0f} GB/s reading the FP8 weight ({read_us:.1f} us)"
    )
    print(f"{'path':>28} " + " ".join(f"{'M=' + str(m):>8}" for m in range(1, 9)) + "   floor")
    for name in dict.fromkeys(r["path"] for r in rows):
        cells = {r["m"]: r for r in rows if r["path"] == name}
        line = " ".join(
            f"{cells[m]['us']:>8.1f}" if m in cells else f"{'-':>8}" for m in range(1, 9)
        )
        first = cells[min(cells)]
        best = min(r["us"] for r in cells.values() if r["us"] == r["us"]) if cells else 0
        share = first["floor_us"] / best if best else 0
        print(
            f"{name:>28} {line}   "
            f"{first['floor_us']:.1f}/{first['copy_floor_us']:.1f}/{first['read_floor_us']:.1f} us "
            f"(best {share:.0%} of peak floor)"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "gpu": torch.cuda.get_device_name(),
                    "peak_gbps": args.peak_gbps,
                    "copy_gbps": round(copy_gbps, 1),
                    "read_gbps": round(read_gbps, 1),
                    "rows": rows,
                }
            )
        )


if __name__ == "__main__":
    main()
