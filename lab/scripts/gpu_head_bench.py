"""Microbenchmark of the LM head alone at M = 1..8 tokens, under CUDA graphs (GPU only).

Rows: BF16 matmul (SGLang's default head), FP32 logits (`enable_fp32_lm_head`: BF16
weight, FP32 output), SGLang's `Fp8LinearMethod.apply`, and every candidate kernel the
FP8 head picks from at load (app/backend/engine/patches/fp8_head.py: SGLang's CUTLASS path,
cuBLASLt row-wise `torch._scaled_mm`, the Triton GEMV in each tiling), each against the
byte floor of its weight at the nominal peak, at the copy bandwidth measured here, and at
the read bandwidth of the fastest pass that only reads the FP8 head's own bytes (torch's
reduction, or a Triton stream in one of a few tilings): what a kernel that streams the
weight can reach here. Calls run back to back, as the head runs in a verify; at M = 1 each
path is also timed with the L2 cache scrubbed before every call (`cold_us`), as in decode,
where the other layers' weights pass through L2 between two head calls.

`--sweep` also times every tiling of `fp8_gemv.SWEEP` at M = 1 and 4, fastest first, each also
its GEMV alone, on activations quantized beforehand.

    python lab/scripts/gpu_head_bench.py [--peak-gbps 4800] [--json PATH] [--sweep]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backend.engine.patches import fp8_gemv, fp8_head  # noqa: E402
from app.backend.engine.patches.head_choice import floor_us  # noqa: E402

VOCAB, HIDDEN = 157184, 2560
STREAM_TILES = ((4096, 4), (8192, 8), (16384, 8))
"""(int32 words a program, warps) of the Triton read stream."""


@triton.jit
def _stream(src, out, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + tl.program_id(0), tl.xor_sum(tl.load(src + offs, mask=offs < n, other=0)))


def stream_read_us(words: torch.Tensor) -> dict[str, float]:
    """GPU time of a pass that reads `words` (int32, 1-D) once and writes one word a program."""
    times = {"torch-amax": fp8_head.graph_time_us(lambda: words.amax())}
    for block, warps in STREAM_TILES:
        out = torch.empty(triton.cdiv(words.numel(), block), device="cuda", dtype=torch.int32)
        times[f"triton-stream[{block}w{warps}]"] = fp8_head.graph_time_us(
            lambda out=out, block=block, warps=warps: _stream[(out.numel(),)](
                words, out, words.numel(), BLOCK=block, num_warps=warps
            )
        )
    return times


def cold_us(fn: Callable[[], Any], scrub: torch.Tensor, scrub_us: float) -> float:
    """`fn`'s time when the L2 cache holds none of its data: each call after a scrub."""

    def scrubbed() -> None:
        scrub.zero_()
        fn()

    return round(fp8_head.graph_time_us(scrubbed) - scrub_us, 1)


def sweep_rows(head: Any, weight: torch.Tensor, read_us: float) -> list[dict[str, Any]]:
    """Every SWEEP tiling at M = 1 and 4, each also its GEMV alone on activations quantized
    beforehand (a tiling that fails is listed with its error)."""
    rows, scale = head.weight.t(), head.weight_scale.reshape(-1)
    x = torch.randn(4, HIDDEN, device="cuda", dtype=torch.bfloat16)
    quantized = {m: fp8_gemv.quantize_tokens(x[:m]) for m in (1, 4)}
    reference = (x @ weight.t()).float()
    results = []
    for config in fp8_gemv.SWEEP:
        row: dict[str, Any] = {"path": f"triton-{config.name}"}
        try:
            for m, (q, x_scales) in quantized.items():
                row[f"us_m{m}"] = fp8_head.graph_time_us(
                    lambda m=m, c=config: fp8_gemv.gemv(x[:m], rows, scale, c)
                )
                row[f"gemv_only_us_m{m}"] = fp8_head.graph_time_us(
                    lambda q=q, s=x_scales, c=config: fp8_gemv.quantized_gemv(q, s, rows, scale, c)
                )
            out = fp8_gemv.gemv(x, rows, scale, config).float()
            row["cosine_min"] = round(
                torch.nn.functional.cosine_similarity(out, reference, dim=-1).min().item(), 5
            )
        except Exception as exc:  # shared memory this GPU lacks, say: listed, not fatal
            row["error"] = f"{type(exc).__name__}: {str(exc)[:160]}"
        results.append(row)
    ran = sorted((r for r in results if "error" not in r), key=lambda r: r["us_m1"] + r["us_m4"])
    print(f"sweep, fastest first (a pass that only reads the weight: {read_us:.1f} us):")
    for r in ran:
        print(
            f"{r['path']:>36} M=1 {r['us_m1']:7.1f} (quantized before: {r['gemv_only_us_m1']:6.1f})"
            f"  M=4 {r['us_m4']:7.1f} ({r['gemv_only_us_m4']:6.1f})"
            f"  {read_us / r['us_m1']:.0%} of the read pass"
            f"  cosine {r['cosine_min']}"
        )
    for r in results:
        if "error" in r:
            print(f"{r['path']:>30} {r['error']}")
    return results


class HeadDouble(torch.nn.Module):
    """A stand-in for ParallelLMHead: just the weight the quant methods read and replace."""

    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--peak-gbps", type=float, default=4800.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--sweep", action="store_true", help="also time fp8_gemv.SWEEP")
    args = parser.parse_args()
    from sglang.srt.layers.quantization.fp8 import Fp8Config, Fp8LinearMethod

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
    weight_words = ling_head.weight.t().reshape(-1).view(torch.int32)  # the FP8 rows, 4 a word
    reads = stream_read_us(weight_words)
    read_us = min(reads.values())
    read_gbps = weight.numel() / (read_us * 1e3)
    scrub = torch.empty(
        2 * torch.cuda.get_device_properties(0).L2_cache_size, device="cuda", dtype=torch.uint8
    )
    scrub_us = fp8_head.graph_time_us(scrub.zero_)
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
            cosine = cold = None
            try:
                us = fp8_head.graph_time_us(fn)
                cold = cold_us(fn, scrub, scrub_us) if m == 1 else None
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
                    "cold_us": cold,
                    "floor_us": round(floor_us(nbytes, args.peak_gbps), 1),
                    "copy_floor_us": round(floor_us(nbytes, copy_gbps), 1),
                    "read_floor_us": round(floor_us(nbytes, read_gbps), 1),
                    "cosine_min": None if cosine is None else round(cosine, 5),
                }
            )
    for name, us in reads.items():
        print(
            f"read of the FP8 head's {weight.numel() / 1e6:.0f} MB, {name}: {us:.1f} us, "
            f"{weight.numel() / (us * 1e3):.0f} GB/s"
        )
    print(
        f"LM head {VOCAB} x {HIDDEN} on {torch.cuda.get_device_name()}, CUDA graphs; floor at "
        f"{args.peak_gbps:.0f} GB/s peak / {copy_gbps:.0f} GB/s measured copy bandwidth / "
        f"{read_gbps:.0f} GB/s reading the FP8 weight ({read_us:.1f} us)"
    )
    print(
        f"{'path':>28} "
        + " ".join(f"{'M=' + str(m):>8}" for m in range(1, 9))
        + f" {'M=1 cold':>8}   floor"
    )
    for name in dict.fromkeys(r["path"] for r in rows):
        cells = {r["m"]: r for r in rows if r["path"] == name}
        line = " ".join(
            f"{cells[m]['us']:>8.1f}" if m in cells else f"{'-':>8}" for m in range(1, 9)
        )
        first = cells[min(cells)]
        line += f" {first['cold_us'] if first.get('cold_us') is not None else '-':>8}"
        best = min(r["us"] for r in cells.values() if r["us"] == r["us"]) if cells else 0
        share = first["floor_us"] / best if best else 0
        print(
            f"{name:>28} {line}   "
            f"{first['floor_us']:.1f}/{first['copy_floor_us']:.1f}/{first['read_floor_us']:.1f} us "
            f"(best {share:.0%} of peak floor)"
        )
    sweep = sweep_rows(ling_head, weight, read_us) if args.sweep else []
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "gpu": torch.cuda.get_device_name(),
                    "peak_gbps": args.peak_gbps,
                    "copy_gbps": round(copy_gbps, 1),
                    "read_gbps": round(read_gbps, 1),
                    "read_us": reads,
                    "l2_scrub_us": scrub_us,
                    "rows": rows,
                    "sweep": sweep,
                }
            )
        )


if __name__ == "__main__":
    main()
