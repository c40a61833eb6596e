"""Run the engine's FP8-head installation on stand-alone heads and print its self-test (GPU).

The same `quantize_head` the scheduler runs after loading, on a dummy-loaded head
(uniform +-1e-3, as `load_format="dummy"` fills it) and a known-answer head (permuted
unit-RMS rows), without booting SGLang's engine.

    python lab/scripts/gpu_fp8_selftest.py
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backend.engine.patches import fp8_head  # noqa: E402
from app.levers.model.fp8_head import MIN_COSINE, MIN_TOP1  # noqa: E402

VOCAB, HIDDEN = 157184, 2560


def model_with(weight: torch.Tensor) -> types.SimpleNamespace:
    """What quantize_head reads: `lm_head.weight` and `config.tie_word_embeddings`."""
    head = torch.nn.Module()
    head.weight = torch.nn.Parameter(weight, requires_grad=False)
    return types.SimpleNamespace(lm_head=head, config=types.SimpleNamespace())


def main() -> None:
    torch.manual_seed(0)
    unit = torch.randn(VOCAB, HIDDEN, device="cuda")
    unit = unit / unit.pow(2).mean(-1, keepdim=True).sqrt()
    heads = {
        "dummy": (torch.rand(VOCAB, HIDDEN, device="cuda") * 2e-3 - 1e-3),
        "known-answer": unit[torch.randperm(VOCAB, device="cuda")],
    }
    for name, weight in heads.items():
        fp8_head.FACTS.clear()
        fp8_head.quantize_head(model_with(weight.to(torch.bfloat16)), min_speedup=1.2)
        facts = fp8_head.FACTS
        ok = facts["cosine_min"] >= MIN_COSINE and facts["top1_agreement"] >= MIN_TOP1
        print(f"{name}: {'PASS' if ok else 'FAIL'} {json.dumps(facts)}", flush=True)


if __name__ == "__main__":
    main()
