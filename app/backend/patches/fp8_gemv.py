"""Triton kernels for the FP8 LM head at a few tokens (M <= 8), run in SGLang's scheduler.

At decode's M = 1..4 the head's time is its weight's bytes over the memory bandwidth. Both
kernels stream each FP8 weight row once and scale each output channel at the end:
- `widen` turns the FP8 rows into BF16 in registers and multiplies by the BF16
  activations (no activation quantization);
- `fp8dot` quantizes the activations per token inside the kernel (each program reads the
  few activation rows twice, from L2) and multiplies FP8 by FP8 on the tensor cores, with
  no widening of the weight;
- `fp8rows` is `fp8dot` with one program per SM, each over an equal run of rows: no tail
  wave, and one pipelined loop that streams on across its row blocks.
Triton compiles them for the GPU at hand (sm_90a on the H200, sm_121a on the Spark's GB10).
"""

from __future__ import annotations

import os
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
    """One kernel and tiling: output rows per program, K per step, warps, pipeline stages."""

    kernel: str
    block_n: int
    block_k: int
    warps: int
    stages: int

    @property
    def name(self) -> str:
        return f"{self.kernel}[{self.block_n}x{self.block_k}w{self.warps}s{self.stages}]"


CONFIGS = (
    GemvConfig("widen", 64, 256, 4, 3),
    GemvConfig("widen", 128, 128, 4, 4),
    GemvConfig("fp8dot", 64, 128, 4, 4),
    GemvConfig("fp8dot", 128, 128, 4, 4),
    GemvConfig("fp8dot", 256, 128, 8, 2),
    GemvConfig("fp8dot", 256, 128, 8, 3),
    GemvConfig("fp8dot", 256, 256, 8, 2),
    GemvConfig("fp8dot", 512, 128, 8, 2),
    GemvConfig("fp8rows", 128, 128, 8, 4),
    GemvConfig("fp8rows", 256, 128, 8, 3),
)
"""On the H200 the widest FP8-by-FP8 tile ran fastest (256 x 128: 102.6 us, 128 x 128:
122.4 us at M = 1). A tiling that needs more shared memory than the GPU has (sm_12x has
about 100 KB an SM) fails to compile there, and the choice at load skips it."""


@triton.jit
def _x_scales(
    x_ptr, m, k, stride_xm, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr, FP8_MAX: tl.constexpr
):
    """Per-token FP8 scales of the activations: one pass over them, from L2."""
    tokens = tl.arange(0, BLOCK_M)
    amax = tl.zeros((BLOCK_M,), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(
            x_ptr + tokens[None, :] * stride_xm + cols[:, None],
            mask=(tokens < m)[None, :],
            other=0.0,
        )
        amax = tl.maximum(amax, tl.max(tl.abs(x.to(tl.float32)), axis=0))
    return tl.maximum(amax, 1e-12) / FP8_MAX


@triton.jit
def _fp8_head_gemv(
    x_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    m,
    n,
    k,
    stride_xm,
    stride_wn,
    stride_om,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    QUANTIZE_X: tl.constexpr,
    FP8_MAX: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens = tl.arange(0, BLOCK_M)
    row_ok = rows < n
    token_ok = tokens < m
    x_scale = tl.full((BLOCK_M,), 1.0, dtype=tl.float32)
    if QUANTIZE_X:
        x_scale = _x_scales(x_ptr, m, k, stride_xm, BLOCK_M, BLOCK_K, FP8_MAX)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * stride_wn + cols[None, :], mask=row_ok[:, None])
        x = tl.load(
            x_ptr + tokens[None, :] * stride_xm + cols[:, None], mask=token_ok[None, :], other=0.0
        )
        if QUANTIZE_X:
            acc += tl.dot(w, (x.to(tl.float32) / x_scale[None, :]).to(tl.float8e4nv))
        else:
            acc += tl.dot(w.to(tl.bfloat16), x)
    scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
    acc = acc * scale[:, None] * x_scale[None, :]
    out = out_ptr + tokens[None, :] * stride_om + rows[:, None]
    tl.store(out, acc.to(tl.bfloat16), mask=row_ok[:, None] & token_ok[None, :])


@triton.jit
def _fp8_head_gemv_rows(
    x_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    m,
    n,
    k,
    stride_xm,
    stride_wn,
    stride_om,
    rows_per_program,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    FP8_MAX: tl.constexpr,
):
    first = tl.program_id(0) * rows_per_program
    last = tl.minimum(first + rows_per_program, n)
    tokens = tl.arange(0, BLOCK_M)
    token_ok = tokens < m
    x_scale = _x_scales(x_ptr, m, k, stride_xm, BLOCK_M, BLOCK_K, FP8_MAX)
    k_steps = k // BLOCK_K
    blocks = tl.cdiv(last - first, BLOCK_N)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for i in range(blocks * k_steps):  # one loop over (row block, K step): one pipeline
        step = i % k_steps
        rows = first + (i // k_steps) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < last
        cols = step * BLOCK_K + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * stride_wn + cols[None, :], mask=row_ok[:, None])
        x = tl.load(
            x_ptr + tokens[None, :] * stride_xm + cols[:, None], mask=token_ok[None, :], other=0.0
        )
        acc += tl.dot(w, (x.to(tl.float32) / x_scale[None, :]).to(tl.float8e4nv))
        if step == k_steps - 1:
            scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
            out = out_ptr + tokens[None, :] * stride_om + rows[:, None]
            result = acc * scale[:, None] * x_scale[None, :]
            tl.store(out, result.to(tl.bfloat16), mask=row_ok[:, None] & token_ok[None, :])
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)


def _processors(device: torch.device) -> int:
    """SMs of the GPU (CPU cores under Triton's interpreter)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return os.cpu_count() or 1


def fits(config: GemvConfig, k: int) -> bool:
    """The kernel steps K in whole blocks (the head's K is 2,560)."""
    return k % config.block_k == 0


def gemv(
    x: torch.Tensor, rows: torch.Tensor, scale: torch.Tensor, config: GemvConfig
) -> torch.Tensor:
    """`x @ (rows * scale).T` for x [M, K] BF16 (M <= MAX_M), rows [N, K] FP8, scale [N] FP32."""
    m, k = x.shape
    n = rows.shape[0]
    if m > MAX_M or not fits(config, k) or rows.stride(1) != 1 or x.stride(1) != 1:
        raise ValueError(f"fp8 head GEMV: M={m}, K={k}, config {config.name} do not fit")
    out = torch.empty((m, n), device=x.device, dtype=torch.bfloat16)
    if config.kernel == "fp8rows":
        programs = _processors(x.device)
        _fp8_head_gemv_rows[(programs,)](
            x,
            rows,
            scale,
            out,
            m,
            n,
            k,
            x.stride(0),
            rows.stride(0),
            out.stride(0),
            triton.cdiv(n, programs),
            BLOCK_M=BLOCK_M,
            BLOCK_N=config.block_n,
            BLOCK_K=config.block_k,
            num_warps=config.warps,
            num_stages=config.stages,
            FP8_MAX=FP8_MAX,
        )
        return out
    _fp8_head_gemv[(triton.cdiv(n, config.block_n),)](
        x,
        rows,
        scale,
        out,
        m,
        n,
        k,
        x.stride(0),
        rows.stride(0),
        out.stride(0),
        BLOCK_M=BLOCK_M,
        BLOCK_N=config.block_n,
        BLOCK_K=config.block_k,
        num_warps=config.warps,
        num_stages=config.stages,
        QUANTIZE_X=config.kernel == "fp8dot",
        FP8_MAX=FP8_MAX,
    )
    return out
