"""Emulate the FP8 head self-test on the CPU (torch only): does it separate good from broken?

Per-channel e4m3 weights and per-token e4m3 activations, as ling-chat's head does, on a
dummy-loaded head (uniform +-1e-3), a known-answer head (permuted unit-RMS rows) and a
garbage head (what a draft reading FP8 bytes as BF16 sees). Prints cosine and top-1
agreement on random states (near-ties) and on head-row states (one clear winner).

    python lab/scripts/fp8_selftest_sim.py
"""

from __future__ import annotations

import torch

VOCAB, HIDDEN, ROWS = 157184, 2560, 64


def fp8_rows(x: torch.Tensor) -> torch.Tensor:
    """Quantize each row to e4m3 with its own scale, then dequantize."""
    scale = x.abs().amax(-1, keepdim=True).clamp_min(1e-12) / 448.0
    return (x / scale).to(torch.float8_e4m3fn).float() * scale


def states(weight: torch.Tensor) -> torch.Tensor:
    """The self-test's states: ROWS random ones, then ROWS unit-RMS head rows."""
    gen = torch.Generator().manual_seed(0)
    random = torch.randn(ROWS, HIDDEN, generator=gen)
    own = weight[torch.randint(0, VOCAB, (ROWS,), generator=gen)]
    own = own / own.pow(2).mean(-1, keepdim=True).sqrt()
    return torch.cat([random, own]).to(torch.bfloat16).float()


def main() -> None:
    torch.manual_seed(0)
    unit = torch.randn(VOCAB, HIDDEN)
    unit = unit / unit.pow(2).mean(-1, keepdim=True).sqrt()
    heads = {
        "dummy": (torch.rand(VOCAB, HIDDEN) * 2e-3 - 1e-3).to(torch.bfloat16).float(),
        "known-answer": unit[torch.randperm(VOCAB)].to(torch.bfloat16).float(),
    }
    for name, weight in heads.items():
        x = states(weight)
        reference = x @ weight.t()
        for label, quantized in (("fp8", fp8_rows(weight)), ("garbage", torch.randn_like(weight))):
            out = fp8_rows(x) @ quantized.t()
            cosine = torch.nn.functional.cosine_similarity(out, reference, dim=-1)
            agree = (out.argmax(-1) == reference.argmax(-1)).float()
            print(
                f"{name:12} {label:8} cosine min {cosine.min():.4f}  top-1 random "
                f"{agree[:ROWS].mean():.3f}  top-1 head rows {agree[ROWS:].mean():.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
