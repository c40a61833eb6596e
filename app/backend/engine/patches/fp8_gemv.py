"""Triton kernels for the FP8 LM head at a few tokens (M <= 8), run in SGLang's scheduler.

At decode's M = 1..4 the head's time is its weight's bytes over the memory bandwidth. Every
kernel here quantizes the activations per token once, in a small kernel of its own, streams
each FP8 weight row once, multiplies FP8 by FP8 on the tensor cores (no widening of the
weight) and scales each output channel at the end:
- `qdot` loads the weight tiles with the threads' own loads, pipelined; with `pdl` it is
  launched as a programmatic dependent of the quantization, so that its programs are
  resident while the quantization runs and wait for the quantized activations at their
  first use;
- `qtma` copies the weight tiles with the tensor memory accelerator (TMA).
Triton compiles them for the GPU at hand (sm_90a on the H200, sm_121a on the Spark's GB10).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

MAX_M = 8
"""The most tokens one call serves; the dot pads them to BLOCK_M rows."""
BLOCK_M = 16
FP8_MAX = 448.0
"""The largest float8_e4m3fn value."""


@dataclass(frozen=True, slots=True)
class GemvConfig:
    """One kernel and tiling: output rows per program, K per step, warps, pipeline stages,
    and for `qdot` whether it launches while the quantization runs."""

    kernel: str
    block_n: int
    block_k: int
    warps: int
    stages: int
    pdl: bool = False

    @property
    def name(self) -> str:
        tiling = f"{self.block_n}x{self.block_k}w{self.warps}s{self.stages}"
        return f"{self.kernel}[{tiling}{'+pdl' if self.pdl else ''}]"


_SWEEP_TILINGS = (  # BLOCK_N, BLOCK_K, pipeline stages
    (64, 256, (3, 4, 6)),
    (64, 512, (2,)),
    (128, 128, (4, 6)),
    (128, 256, (2, 3, 4)),
    (256, 128, (3, 4)),
)
SWEEP = tuple(
    GemvConfig("qdot", n, k, warps, stages, pdl=True)
    for n, k, stage_counts in _SWEEP_TILINGS
    for stages in stage_counts
    for warps in (4, 8)
)
"""Tilings `lab/scripts/gpu_head_bench.py --sweep` times beside CONFIGS, to find the next ones."""

CONFIGS = (
    GemvConfig("qdot", 128, 256, 8, 3, pdl=True),
    GemvConfig("qdot", 128, 256, 4, 3, pdl=True),
    GemvConfig("qdot", 128, 256, 8, 2, pdl=True),
    GemvConfig("qdot", 128, 128, 4, 4, pdl=True),
    GemvConfig("qdot", 64, 256, 4, 3, pdl=True),
    GemvConfig("qdot", 64, 256, 4, 4, pdl=True),
    GemvConfig("qtma", 128, 128, 4, 4),
)
"""The tilings worth timing at load, from every candidate timed on the H200 at M = 1 and 4
(lab/results/2026-12-01-h200-lm-head-session{9,10,11}*.json): qdot 128 x 256 in 3 stages with
`pdl` ran 92.7-93.5 / 94.6-95.3 us (a pass that only reads the weight: 88.1-88.5 us;
CUTLASS 100), its 4-warp form as fast at M = 4; 128 x 128 and 64 x 256 ran 1-2 us slower,
the TMA copies 2 us; `pdl` gained 0.3-1.0 us on every tiling. Stream-K and split-K, one
persistent program an SM, loading the first weight tile before the wait, prefetching into
L2, widening the weight to BF16, and quantizing the activations in each program all ran
3-60 us slower. Compiled for sm_121a (mma.sync, no wgmma), each of these tilings takes 37-74
KB of shared memory, within a GB10 SM's 99 KB; the choice at load skips a tiling that fails."""


@triton.jit
def _quantize_tokens(
    x_ptr,
    q_ptr,
    s_ptr,
    k,
    stride_xm,
    BLOCK_K: tl.constexpr,
    FP8_MAX: tl.constexpr,
    PDL: tl.constexpr,
):
    """One token's activations to FP8 with a per-token scale: q = x / s, s = amax / FP8_MAX.
    With PDL, a GEMV launched as its dependent may start at once (it waits for q itself)."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    token = tl.program_id(0)
    cols = tl.arange(0, BLOCK_K)
    ok = cols < k
    x = tl.load(x_ptr + token * stride_xm + cols, mask=ok, other=0.0).to(tl.float32)
    x_scale = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-12) / FP8_MAX
    tl.store(q_ptr + token * k + cols, (x / x_scale).to(tl.float8e4nv), mask=ok)
    tl.store(s_ptr + token, x_scale)


@triton.jit
def _scaled_store(acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om):
    """acc [rows, tokens] times both scales, stored as BF16 logits [tokens, rows]."""
    token_ok = tokens < m
    scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
    x_scale = tl.load(xs_ptr + tokens, mask=token_ok, other=0.0)
    out = out_ptr + tokens[None, :] * stride_om + rows[:, None]
    result = acc * scale[:, None] * x_scale[None, :]
    tl.store(out, result.to(tl.bfloat16), mask=row_ok[:, None] & token_ok[None, :])


@triton.jit
def _fp8_head_qdot(
    q_ptr,
    xs_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    m,
    n,
    stride_wn,
    stride_om,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens = tl.arange(0, BLOCK_M)
    row_ok = rows < n
    token_ok = tokens < m
    w_rows = w_ptr + rows[:, None] * stride_wn
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if PDL:  # launched while the quantization runs: q and its scales are complete after this
        tl.extra.cuda.gdc_wait()
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_rows + cols[None, :], mask=row_ok[:, None])
        q = tl.load(q_ptr + tokens[None, :] * K + cols[:, None], mask=token_ok[None, :], other=0.0)
        acc += tl.dot(w, q)
    _scaled_store(acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om)


@triton.jit
def _fp8_head_qtma(
    q_ptr,
    xs_ptr,
    w_desc,
    scale_ptr,
    out_ptr,
    m,
    n,
    stride_om,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    first = tl.program_id(0) * BLOCK_N
    tokens = tl.arange(0, BLOCK_M)
    token_ok = tokens < m
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = w_desc.load([first, k0])
        q = tl.load(q_ptr + tokens[None, :] * K + cols[:, None], mask=token_ok[None, :], other=0.0)
        acc += tl.dot(w, q)
    rows = first + tl.arange(0, BLOCK_N)
    _scaled_store(acc, rows, rows < n, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om)


def fits(config: GemvConfig, k: int) -> bool:
    """The kernel steps K in whole blocks (the head's K is 2,560)."""
    return k % config.block_k == 0


def quantize_tokens(x: torch.Tensor, pdl: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] BF16 -> (FP8 [M, K], FP32 scales [M]), one scale a token; `pdl`: a GEMV
    launched next as a programmatic dependent may start while this runs."""
    m, k = x.shape
    q = torch.empty((m, k), device=x.device, dtype=torch.float8_e4m3fn)
    scales = torch.empty((m,), device=x.device, dtype=torch.float32)
    _quantize_tokens[(m,)](
        x, q, scales, k, x.stride(0), BLOCK_K=triton.next_power_of_2(k), FP8_MAX=FP8_MAX, PDL=pdl
    )
    return q, scales


def gemv(
    x: torch.Tensor, rows: torch.Tensor, scale: torch.Tensor, config: GemvConfig
) -> torch.Tensor:
    """`x @ (rows * scale).T` for x [M, K] BF16 (M <= MAX_M), rows [N, K] FP8, scale [N] FP32."""
    m, k = x.shape
    if m > MAX_M or not fits(config, k) or rows.stride(1) != 1 or x.stride(1) != 1:
        raise ValueError(f"fp8 head GEMV: M={m}, K={k}, config {config.name} do not fit")
    q, x_scales = quantize_tokens(x, _pdl(config, x.device))
    return quantized_gemv(q, x_scales, rows, scale, config)


def quantized_gemv(
    q: torch.Tensor, x_scales: torch.Tensor, rows: torch.Tensor, scale: torch.Tensor,
    config: GemvConfig,
) -> torch.Tensor:  # fmt: skip
    """`gemv` after the quantization: q [M, K] FP8 (contiguous), x_scales [M] FP32."""
    m, k = q.shape
    n = rows.shape[0]
    out = torch.empty((m, n), device=q.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(n, config.block_n),)
    if config.kernel == "qdot":
        pdl = _pdl(config, q.device)
        _fp8_head_qdot[grid](
            q, x_scales, rows, scale, out, m, n, rows.stride(0), out.stride(0), K=k, PDL=pdl,
            launch_pdl=pdl, **_tiling(config),
        )  # fmt: skip
    elif config.kernel == "qtma":
        from triton.tools.tensor_descriptor import TensorDescriptor

        w_desc = TensorDescriptor.from_tensor(rows, [config.block_n, config.block_k])
        _fp8_head_qtma[grid](
            q, x_scales, w_desc, scale, out, m, n, out.stride(0), K=k, **_tiling(config)
        )
    else:
        raise ValueError(f"fp8 head GEMV: no kernel {config.kernel!r}")
    return out


def _tiling(config: GemvConfig) -> dict[str, int]:
    return {
        "BLOCK_M": BLOCK_M,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "num_warps": config.warps,
        "num_stages": config.stages,
    }


def _pdl(config: GemvConfig, device: torch.device) -> bool:
    """Launch as a programmatic dependent: on a GPU (Triton's interpreter has no PDL)."""
    return config.pdl and device.type == "cuda"
