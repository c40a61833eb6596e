"""The FP8 LM head: SGLang's online per-channel FP8 quantization, installed after load.

`BailingMoeV3ForCausalLM.precompile_kernels_after_loading` is called by SGLang's model
runner once the target's weights are loaded and post-processed, before the draft is
built and before any CUDA graph is captured, so every captured graph reads the FP8
head. The NEXTN draft class is a different class and is left alone here.
"""

from __future__ import annotations

from typing import Any

import torch

from app.backend.patches import refusal

FACTS: dict[str, Any] = {"installed": False}
"""What quantizing the head found; read by evidence.collect()."""

SELFTEST_ROWS = 64
TIMING_ITERS = 20
TIMING_BLOCKS = 5
_method_cls: Any = None


def method_class() -> Any:
    """ling-chat's head method: SGLang's `Fp8LinearMethod` with a lean, counted apply."""
    global _method_cls
    if _method_cls is not None:
        return _method_cls
    from sglang.kernels.ops.gemm import fp8_scaled_mm
    from sglang.kernels.ops.quantization.fp8_kernel import sglang_per_token_quant_fp8
    from sglang.srt.layers.quantization.fp8 import Fp8LinearMethod

    class LingFp8LMHeadMethod(Fp8LinearMethod):
        """Per-channel FP8 e4m3 weight, dynamic per-token FP8 activations, CUTLASS GEMM."""

        captured_calls = 0
        eager_calls = 0

        def apply(self, layer, x, bias=None):
            if torch.cuda.is_current_stream_capturing():
                type(self).captured_calls += 1
            else:
                type(self).eager_calls += 1
            x2 = x.reshape(-1, x.shape[-1])
            if x2.dtype != torch.bfloat16:
                x2 = x2.to(torch.bfloat16)
            qx, x_scale = sglang_per_token_quant_fp8(x2.contiguous())
            out = fp8_scaled_mm(
                qx, layer.weight, x_scale, layer.weight_scale, out_dtype=torch.bfloat16
            )
            if bias is not None:
                out = out + bias
            return out.view(*x.shape[:-1], out.shape[-1])

    _method_cls = LingFp8LMHeadMethod
    return _method_cls


def new_method() -> Any:
    """A head method configured for online (non-serialized) per-channel quantization."""
    from sglang.srt.layers.quantization.fp8 import Fp8Config

    method = method_class()(Fp8Config(is_checkpoint_fp8_serialized=False))
    if not method.cutlass_fp8_supported or method.use_marlin or method.block_quant:
        raise refusal(
            "fp8_head",
            "this GPU has no CUTLASS FP8 path for the head "
            f"(cutlass={method.cutlass_fp8_supported}, marlin={method.use_marlin})",
        )
    return method


def quantize_head(model: Any, min_speedup: float) -> None:
    """Quantize `model.lm_head` to FP8 in place, self-test it and time it against BF16."""
    head = model.lm_head
    weight = head.weight
    if getattr(model.config, "tie_word_embeddings", False):
        raise refusal("fp8_head", "a tied head is also the embedding")
    if weight.dtype != torch.bfloat16:
        raise refusal("fp8_head", f"the head is {weight.dtype}, not BF16")
    states = selftest_states(weight)
    reference = states @ weight.t()
    bf16_us = {str(m): _time_us(lambda m=m: states[:m] @ weight.t()) for m in (1, 4)}
    bf16_bytes = weight.numel() * weight.element_size()

    method = new_method()
    method.process_weights_after_loading(head)
    head.quant_method = method
    out = method.apply(head, states)
    fp8_us = {str(m): _time_us(lambda m=m: method.apply(head, states[:m])) for m in (1, 4)}
    method_class().eager_calls = 0
    cosine = torch.nn.functional.cosine_similarity(out.float(), reference.float(), dim=-1)
    agree = out.argmax(-1) == reference.argmax(-1)
    rows = SELFTEST_ROWS
    FACTS.update(
        installed=True,
        method=type(method).__name__,
        weight_dtype=str(head.weight.dtype).removeprefix("torch."),
        weight_shape=list(head.weight.shape),
        scale_shape=list(head.weight_scale.shape),
        bytes_bf16=bf16_bytes,
        bytes_fp8=head.weight.numel() * head.weight.element_size()
        + head.weight_scale.numel() * head.weight_scale.element_size(),
        selftest_rows=SELFTEST_ROWS,
        cosine_min=round(cosine.min().item(), 6),
        top1_agreement=round(agree[rows:].float().mean().item(), 4),
        top1_random=round(agree[:rows].float().mean().item(), 4),
        timing_us={"bf16": bf16_us, "fp8": fp8_us},
        speedup={m: round(bf16_us[m] / fp8_us[m], 3) for m in bf16_us},
        min_speedup=min_speedup,
    )


def selftest_states(weight: torch.Tensor) -> torch.Tensor:
    """SELFTEST_ROWS random hidden states, then SELFTEST_ROWS copies of random head rows.

    Random states give near-tied logits (top-1 flips on rounding noise, so they only
    feed the cosine); a head row as the state gives its own token a clear lead, where
    FP8 and BF16 must pick the same top-1.
    """
    gen = torch.Generator(device=weight.device).manual_seed(0)
    shape = (SELFTEST_ROWS, weight.shape[1])
    random = torch.randn(shape, device=weight.device, dtype=torch.float32, generator=gen)
    rows = torch.randint(0, weight.shape[0], (SELFTEST_ROWS,), device=weight.device, generator=gen)
    own = weight[rows].float()
    states = torch.cat([random, own / own.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-12)])
    return states.to(torch.bfloat16)


def _time_us(fn: Any) -> float:
    """GPU time of `fn` in microseconds: the best of a few blocks of back-to-back launches.

    The best block is the one least disturbed by other work on the GPU (a desktop
    compositor, another process), so a busy GPU does not fail the speed line by chance.
    """
    for _ in range(5):
        fn()
    blocks = []
    for _ in range(TIMING_BLOCKS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(TIMING_ITERS):
            fn()
        end.record()
        torch.cuda.synchronize()
        blocks.append(start.elapsed_time(end) * 1000 / TIMING_ITERS)
    return round(min(blocks), 2)


def install(min_speedup: float) -> None:
    """Make the target class quantize its head in SGLang's post-load hook."""
    from sglang.srt.models.bailing_moe_v3 import BailingMoeV3ForCausalLM

    previous = getattr(BailingMoeV3ForCausalLM, "precompile_kernels_after_loading", None)

    def precompile_kernels_after_loading(self: Any) -> None:
        if previous is not None:
            previous(self)
        quantize_head(self, min_speedup)

    BailingMoeV3ForCausalLM.precompile_kernels_after_loading = precompile_kernels_after_loading
