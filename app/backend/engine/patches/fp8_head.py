"""The FP8 LM head: SGLang's online per-channel FP8 quantization, installed after load.

`BailingMoeV3ForCausalLM.precompile_kernels_after_loading` is called by SGLang's model
runner once the target's weights are loaded and post-processed, before the draft is
built and before any CUDA graph is captured, so every captured graph reads the FP8
head. The NEXTN draft class is a different class and is left alone here.

Which kernel multiplies by the FP8 weight is decided on the GPU at hand: every
candidate is timed in CUDA graphs at M = 1 and 4 (a draft step and a verify), the
fastest serves calls of up to its `max_m` tokens, SGLang's CUTLASS path the rest, and
the self-test checks the kernels that were installed.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from app.backend.engine.patches import head_choice
from app.backend.engine.patches.boundary import PatchPlan, refusal
from app.levers.model.fp8_head import METHOD as FP8_HEAD_METHOD

FACTS: dict[str, Any] = {"installed": False}
"""What quantizing the head found; read by evidence.collect()."""

SELFTEST_ROWS = 64
GRAPH_ITERS = 20
GRAPH_REPLAYS = 7
COPY_BYTES = 256 << 20
CUTLASS = "cutlass"
_method_cls: Any = None


@dataclass(frozen=True, slots=True)
class HeadKernel:
    """One way to compute `x @ W.T` from the FP8 head: x [M, K] BF16 -> [M, N] BF16."""

    name: str
    run: Callable[[torch.Tensor], torch.Tensor]
    max_m: int | None = None
    """The most tokens it serves in one call (None: any)."""


def method_class() -> Any:
    """ling-chat's head method: SGLang's `Fp8LinearMethod` with a chosen, counted apply."""
    global _method_cls
    if _method_cls is not None:
        return _method_cls
    from sglang.srt.layers.quantization.fp8 import Fp8LinearMethod

    class HeadMethod(Fp8LinearMethod):
        """Per-channel FP8 e4m3 weight; the kernel picked at load for few tokens, CUTLASS else."""

        captured_calls = 0
        eager_calls = 0
        captured_by_kernel: Counter[str] = Counter()
        small: HeadKernel | None = None
        large: HeadKernel | None = None

        def apply(self, layer, x, bias=None):
            x2 = x.reshape(-1, x.shape[-1])
            if x2.dtype != torch.bfloat16:
                x2 = x2.to(torch.bfloat16)
            x2 = x2.contiguous()
            small = self.small
            kernel = small if small and x2.shape[0] <= (small.max_m or x2.shape[0]) else None
            kernel = kernel or self.large or cutlass_kernel(layer)
            if torch.cuda.is_current_stream_capturing():
                type(self).captured_calls += 1
                type(self).captured_by_kernel[kernel.name] += 1
            else:
                type(self).eager_calls += 1
            out = kernel.run(x2)
            if bias is not None:
                out = out + bias
            return out.view(*x.shape[:-1], out.shape[-1])

    HeadMethod.__name__ = HeadMethod.__qualname__ = FP8_HEAD_METHOD
    _method_cls = HeadMethod
    return _method_cls


def new_method(cls: Any = None) -> Any:
    """A head method (of `cls`, default `method_class()`) configured for online
    (non-serialized) per-channel quantization."""
    from sglang.srt.layers.quantization.fp8 import Fp8Config

    method = (cls or method_class())(Fp8Config(is_checkpoint_fp8_serialized=False))
    if not method.cutlass_fp8_supported or method.use_marlin or method.block_quant:
        raise refusal(
            "fp8_head",
            "this GPU has no CUTLASS FP8 path for the head "
            f"(cutlass={method.cutlass_fp8_supported}, marlin={method.use_marlin})",
        )
    return method


def cutlass_kernel(head: Any) -> HeadKernel:
    """SGLang's path: per-token FP8 activations, then the CUTLASS channelwise GEMM."""
    from sglang.kernels.ops.gemm import fp8_scaled_mm
    from sglang.kernels.ops.quantization.fp8_kernel import sglang_per_token_quant_fp8

    def run(x: torch.Tensor) -> torch.Tensor:
        qx, x_scale = sglang_per_token_quant_fp8(x)
        return fp8_scaled_mm(qx, head.weight, x_scale, head.weight_scale, out_dtype=torch.bfloat16)

    return HeadKernel(CUTLASS, run)


def candidates(head: Any) -> list[HeadKernel]:
    """Every kernel this GPU may run the head with, SGLang's own first."""
    from sglang.kernels.ops.quantization.fp8_kernel import sglang_per_token_quant_fp8

    def scaled_mm(x: torch.Tensor) -> torch.Tensor:
        qx, x_scale = sglang_per_token_quant_fp8(x)
        return torch._scaled_mm(
            qx, head.weight, scale_a=x_scale, scale_b=head.weight_scale, out_dtype=torch.bfloat16
        )

    kernels = [cutlass_kernel(head), HeadKernel("scaled-mm", scaled_mm)]
    try:
        from app.backend.engine.patches import fp8_gemv
    except ImportError:  # no Triton: the CUTLASS and cuBLASLt candidates remain
        return kernels
    rows = head.weight.t()  # the [N, K] row-major storage under the [K, N] view
    scale = head.weight_scale.reshape(-1)
    for config in fp8_gemv.CONFIGS:
        if fp8_gemv.fits(config, rows.shape[1]):

            def run(x: torch.Tensor, config: Any = config) -> torch.Tensor:
                return fp8_gemv.gemv(x, rows, scale, config)

            kernels.append(HeadKernel(f"triton-{config.name}", run, fp8_gemv.MAX_M))
    return kernels


def quantize_head(model: Any, min_speedup: float) -> None:
    """Quantize `model.lm_head` to FP8 in place, pick its kernel, self-test and time it."""
    head = model.lm_head
    weight = head.weight
    if getattr(model.config, "tie_word_embeddings", False):
        raise refusal("fp8_head", "a tied head is also the embedding")
    if weight.dtype != torch.bfloat16:
        raise refusal("fp8_head", f"the head is {weight.dtype}, not BF16")
    states = selftest_states(weight)
    reference = states @ weight.t()
    bf16_us = {m: graph_time_us(_bf16_call(weight, states[: int(m)])) for m in TIMED}
    bf16_bytes = weight.numel() * weight.element_size()

    method = new_method()
    method.process_weights_after_loading(head)
    head.quant_method = method
    timings: dict[str, dict[str, object]] = {}
    kernels = {k.name: k for k in candidates(head)}
    for name, kernel in kernels.items():
        timings[name] = {}
        for m in TIMED:
            try:
                timings[name][m] = graph_time_us(_kernel_call(kernel, states[: int(m)]))
            except Exception as exc:  # a kernel this GPU cannot run is out, not fatal
                timings[name][m] = f"{type(exc).__name__}: {exc}"[:200]
    chosen = head_choice.pick(timings)
    if chosen is None:
        raise refusal("fp8_head", f"no FP8 head kernel ran on this GPU: {timings}")
    method.small, method.large = kernels[chosen], kernels[CUTLASS]
    out = _run_blocks(method.small, states)
    fallback = method.large.run(states)
    fp8_bytes = head.weight.numel() * head.weight.element_size() + (
        head.weight_scale.numel() * head.weight_scale.element_size()
    )
    gbps = copy_gbps()
    floor = head_choice.floor_us(fp8_bytes, gbps)
    fp8_us = {m: float(timings[chosen][m]) for m in TIMED}  # type: ignore[arg-type]
    rows = SELFTEST_ROWS
    cosine = _cosine(out, reference)
    FACTS.update(
        installed=True,
        method=type(method).__name__,
        kernel=chosen,
        kernel_max_m=method.small.max_m,
        candidates_us=timings,
        weight_dtype=str(head.weight.dtype).removeprefix("torch."),
        weight_shape=list(head.weight.shape),
        scale_shape=list(head.weight_scale.shape),
        bytes_bf16=bf16_bytes,
        bytes_fp8=fp8_bytes,
        copy_gbps=round(gbps, 1),
        floor_us=round(floor, 2),
        floor_share={m: round(head_choice.floor_share(floor, fp8_us[m]), 3) for m in TIMED},
        selftest_rows=SELFTEST_ROWS,
        cosine_min=round(cosine.min().item(), 6),
        fallback_cosine_min=round(_cosine(fallback, reference).min().item(), 6),
        top1_agreement=round(_agree(out, reference)[rows:].float().mean().item(), 4),
        top1_random=round(_agree(out, reference)[:rows].float().mean().item(), 4),
        timing_us={"bf16": bf16_us, "fp8": fp8_us},
        speedup={m: round(bf16_us[m] / fp8_us[m], 3) for m in TIMED},
        min_speedup=min_speedup,
    )
    method_class().eager_calls = 0


TIMED = head_choice.TIMED_M


def _bf16_call(weight: torch.Tensor, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: x @ weight.t()


def _kernel_call(kernel: HeadKernel, x: torch.Tensor) -> Callable[[], torch.Tensor]:
    return lambda: kernel.run(x)


def _run_blocks(kernel: HeadKernel, states: torch.Tensor) -> torch.Tensor:
    """The kernel over all states, in calls of at most its `max_m` rows."""
    step = kernel.max_m or states.shape[0]
    return torch.cat([kernel.run(states[i : i + step]) for i in range(0, states.shape[0], step)])


def _cosine(out: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(out.float(), reference.float(), dim=-1)


def _agree(out: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    return out.argmax(-1) == reference.argmax(-1)


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


def graph_time_us(fn: Callable[[], Any], iters: int = GRAPH_ITERS) -> float:
    """Median GPU time of one `fn` call, from replays of `iters` calls captured in a CUDA graph.

    Decode runs the head inside CUDA graphs, so this is the time it costs there, with no
    launch overhead from the host.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        for _ in range(iters):
            fn()
    samples = []
    for _ in range(GRAPH_REPLAYS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1000 / iters)
    del graph
    return round(statistics.median(samples), 2)


def copy_gbps() -> float:
    """Device memory bandwidth of a plain copy, counting the bytes read and written."""
    src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    us = graph_time_us(lambda: dst.copy_(src), iters=5)
    return 2 * COPY_BYTES / (us * 1e3)


def install(plan: PatchPlan) -> None:
    """Make the target class quantize its head in SGLang's post-load hook, its kernel at
    least `plan.min_head_speedup` times as fast as BF16 (the FP8 head lever's patch)."""
    from sglang.srt.models.bailing_moe_v3 import BailingMoeV3ForCausalLM

    previous = getattr(BailingMoeV3ForCausalLM, "precompile_kernels_after_loading", None)

    def precompile_kernels_after_loading(self: Any) -> None:
        if previous is not None:
            previous(self)
        quantize_head(self, plan.min_head_speedup)

    BailingMoeV3ForCausalLM.precompile_kernels_after_loading = precompile_kernels_after_loading
