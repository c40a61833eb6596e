"""Can FlashInfer work on this machine, and how long does it take? (GPU only)

    python lab/scripts/gpu_flashinfer_check.py [--moe]

Times the import, then the JIT build of the sampling module and one call of the two
kernels SGLang 0.5.23's NEXTN verify needs to sample (top-k and top-p renormalisation),
checked against the same renormalisation in PyTorch. With --moe, also the build of the
SM90 CUTLASS fused-MoE module of the `baseline` profile. Whatever hangs prints every
thread's stack before the limit (faulthandler), so a stuck build says where it is.
"""

from __future__ import annotations

import argparse
import faulthandler
import sys
import time

import torch

HANG_DUMP_S = 280


def step(name: str, started: float) -> None:
    print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)


def renormalised_reference(probs: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k, then top-p renormalisation in plain PyTorch (the kernels' contract)."""
    kth = probs.topk(top_k, dim=-1).values[:, -1:]
    kept = torch.where(probs >= kth, probs, 0.0)
    kept = kept / kept.sum(-1, keepdim=True)
    ordered, index = kept.sort(dim=-1, descending=True)
    before = ordered.cumsum(-1) - ordered  # mass of the strictly larger ones
    ordered = torch.where(before < top_p, ordered, 0.0)
    nucleus = torch.zeros_like(kept).scatter(-1, index, ordered)
    return nucleus / nucleus.sum(-1, keepdim=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--moe", action="store_true", help="also build the SM90 fused MoE")
    args = parser.parse_args()
    faulthandler.dump_traceback_later(HANG_DUMP_S, repeat=True, file=sys.stdout)

    t0 = time.perf_counter()
    # SGLang points FlashInfer's JIT cache at its own (~/.cache/sglang/.cache/flashinfer)
    # before FlashInfer is imported; without that the modules built here land where the
    # engine never looks, and it builds them again (on the H200: 115 s here, 133 s there).
    from sglang.srt.environ import redirect_third_party_caches

    redirect_third_party_caches()
    import flashinfer
    from flashinfer.jit import env as jit_env
    from flashinfer.sampling import top_k_renorm_probs, top_p_renorm_probs

    step(f"import flashinfer {flashinfer.__version__}", t0)
    print(f"JIT dir: {jit_env.FLASHINFER_JIT_DIR}", flush=True)

    gen = torch.Generator(device="cuda").manual_seed(0)
    logits = torch.randn(4, 157184, device="cuda", generator=gen) * 3
    probs = logits.softmax(-1)
    t0 = time.perf_counter()
    got = top_p_renorm_probs(top_k_renorm_probs(probs, 29), 0.95)
    torch.cuda.synchronize()
    step("sampling module built and run (top-k 29, then top-p 0.95)", t0)
    want = renormalised_reference(probs, 29, 0.95)
    print(
        f"max |flashinfer - torch| = {(got - want).abs().max().item():.2e}; "
        f"nonzero per row {(got > 0).sum(-1).tolist()} vs {(want > 0).sum(-1).tolist()}",
        flush=True,
    )

    if args.moe:
        from flashinfer.fused_moe.core import get_cutlass_fused_moe_module

        t0 = time.perf_counter()
        get_cutlass_fused_moe_module("90")
        step("SM90 CUTLASS fused-MoE module built", t0)
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    main()
