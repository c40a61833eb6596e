"""The hot-vocabulary draft head against the full FP8 head, under CUDA graphs (GPU only).

The full head: ling-chat's FP8 head (157,184 rows, per-row scales) quantized from random
BF16 weights as at load (patches/fp8_head.py). The hot head: `--rows` of its rows at
random ids, sliced bit for bit as the lever's patch slices them (patches/hot_vocab.py
`sliced`), its kernel picked by the patch's own `choose_kernel`. For each head: every
candidate kernel's GPU time at M = 1 and 4 (a draft step runs M = 1 at batch 1), the
chosen kernel's time at M = 1 with the L2 cache scrubbed before every call (as in decode,
where the layers' weights pass through L2 between two head calls), its bytes; then the
patch's selftest (cosine and mapped-back top-1 against the full head).

    python lab/scripts/gpu_hot_head_bench.py [--rows 32768] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gpu_head_bench import HIDDEN, VOCAB, HeadDouble, cold_us  # noqa: E402

from app.backend.engine.patches import fp8_head, hot_vocab  # noqa: E402


def timed(head: Any, scrub: torch.Tensor, scrub_us: float) -> dict[str, Any]:
    """The patch's kernel choice for `head`, every candidate's times, the chosen one's cold
    time at M = 1, and the head's bytes."""
    chosen, timings = hot_vocab.choose_kernel(head)
    head.quant_method.small, head.quant_method.large = chosen
    x = torch.randn(1, HIDDEN, device="cuda", dtype=torch.bfloat16)
    return {
        "rows": int(head.weight.shape[1]),
        "bytes": sum(t.numel() * t.element_size() for t in (head.weight, head.weight_scale)),
        "kernel": chosen[0].name,
        "us_m1": timings[chosen[0].name]["1"],
        "us_m4": timings[chosen[0].name]["4"],
        "cold_us_m1": cold_us(lambda: chosen[0].run(x), scrub, scrub_us),
        "candidates_us": timings,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=hot_vocab.ROWS)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.manual_seed(0)
    full = HeadDouble((torch.randn(VOCAB, HIDDEN, device="cuda") * 0.02).to(torch.bfloat16))
    full.quant_method = fp8_head.new_method()
    full.quant_method.process_weights_after_loading(full)
    table = torch.randperm(VOCAB, device="cuda")[: args.rows]
    hot = hot_vocab.sliced(full, table)
    scrub = torch.empty(
        2 * torch.cuda.get_device_properties(0).L2_cache_size, device="cuda", dtype=torch.uint8
    )
    scrub_us = fp8_head.graph_time_us(scrub.zero_)
    result = {
        "device": torch.cuda.get_device_name(0),
        "full": timed(full, scrub, scrub_us),
        "hot": timed(hot, scrub, scrub_us),
        "selftest": hot_vocab.selftest(full, hot),
        "bytes_equal": hot_vocab.compare(hot, full),
    }
    for name in ("full", "hot"):
        r = result[name]
        print(
            f"{name:>4}: {r['rows']:,} rows, {r['bytes'] / 1e6:.1f} MB, kernel {r['kernel']}: "
            f"M=1 {r['us_m1']} us (L2 cold {r['cold_us_m1']}), M=4 {r['us_m4']} us"
        )
    f, h = result["full"], result["hot"]
    print(
        f"hot/full at M=1: {h['us_m1'] / f['us_m1']:.3f} warm, "
        f"{h['cold_us_m1'] / f['cold_us_m1']:.3f} cold; bytes {h['bytes'] / f['bytes']:.3f}; "
        f"a draft round's 3 steps save {3 * (f['cold_us_m1'] - h['cold_us_m1']):.1f} us cold; "
        f"selftest {result['selftest']}, {result['bytes_equal']} on {result['device']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
