"""A Triton GEMV for the FP8 LM head at a few tokens (M <= 8), run in SGLang's scheduler.

At decode's M = 1..4 the head's time is its weight's bytes over the memory bandwidth.
This kernel streams each FP8 weight row once, widens it to BF16 in registers, multiplies
by the BF16 activations on the tensor cores (no activation quantization) and scales each
output channel at the end. Triton compiles it for the GPU at hand (sm_90a on the H200,
sm_121a on the Spark's GB10).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

MAX_M = 8
"""The most tokens one call serves; the dot pads them to BLOCK_M rows."""
BLOCK_M = 16


@dataclass(frozen=True, slots=True)
class GemvConfig:
    """One tiling of the head: output rows per program, K per step, warps, pipeline stages."""

    block_n: int
    block_k: int
    warps: int
    stages: int

    @property
    def name(self) -> str:
        return f"{self.block_n}x{self.block_k}w{self.warps}s{self.stages}"


CONFIGS = (
    GemvConfig(64, 256, 4, 3),
    GemvConfig(128, 256, 4, 3),
    GemvConfig(128, 128, 4, 4),
    GemvConfig(256, 128, 8, 3),
    GemvConfig(64, 512, 4, 2),
    GemvConfig(128, 512, 8, 2),
)


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
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens = tl.arange(0, BLOCK_M)
    row_ok = rows < n
    token_ok = tokens < m
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * stride_wn + cols[None, :], mask=row_ok[:, None])
        x = tl.load(
            x_ptr + tokens[None, :] * stride_xm + cols[:, None], mask=token_ok[None, :], other=0.0
        )
        acc += tl.dot(w.to(tl.bfloat16), x)
    scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
    acc = acc * scale[:, None]
    out = out_ptr + tokens[None, :] * stride_om + rows[:, None]
    tl.store(out, acc.to(tl.bfloat16), mask=row_ok[:, None] & token_ok[None, :])


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
    )
    return out
