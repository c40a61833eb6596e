"""Triton kernels for the FP8 LM head at a few tokens (M <= 8), run in SGLang's scheduler.

At decode's M = 1..4 the head's time is its weight's bytes over the memory bandwidth. Every
kernel streams each FP8 weight row once and scales each output channel at the end:
- `widen` turns the FP8 rows into BF16 in registers and multiplies by the BF16
  activations (no activation quantization);
- `qdot` quantizes the activations per token once, in a small kernel of its own, and
  multiplies FP8 by FP8 on the tensor cores, with no widening of the weight: the GEMV's
  programs stream the weight from their first instruction;
- `qrows` is `qdot` with `per_sm` programs an SM, each over an equal run of rows: no tail
  wave, and one pipelined loop that streams on across its row blocks;
- `qtma` is `qdot` with the weight tiles copied by the tensor memory accelerator (TMA).
`qdot` can also start early: launched as a programmatic dependent launch (`pdl`) while the
quantization runs, each program asks L2 for the first `prefetch_k` bytes of its rows, and
waits for the quantized activations only then.
Triton compiles them for the GPU at hand (sm_90a on the H200, sm_121a on the Spark's GB10).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

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
    """One kernel and tiling: output rows per program, K per step, warps, pipeline stages;
    for `qrows` the programs an SM; for `qdot` whether the weight's lines leave L2 first,
    whether it launches while the quantization runs, and how many bytes of each row it asks
    L2 for before its loop."""

    kernel: str
    block_n: int
    block_k: int
    warps: int
    stages: int
    per_sm: int = 1
    evict_first: bool = False
    pdl: bool = False
    prefetch_k: int = 0

    @property
    def name(self) -> str:
        tiling = f"{self.block_n}x{self.block_k}w{self.warps}s{self.stages}"
        tiling += f"p{self.per_sm}" if self.kernel == "qrows" else ""
        tiling += "+ef" if self.evict_first else ""
        tiling += "+pdl" if self.pdl else ""
        tiling += f"+pf{self.prefetch_k}" if self.prefetch_k else ""
        return f"{self.kernel}[{tiling}]"


_SWEEP_TILINGS = (
    (32, 512, (2, 3, 4)),
    (64, 256, (3, 4, 6)),
    (64, 512, (2, 3)),
    (128, 128, (4, 6, 8)),
    (128, 256, (2, 3, 4)),
    (256, 128, (3, 4)),
    (256, 256, (2,)),
)
_SWEEP_BEST = (
    GemvConfig("qdot", 128, 256, 8, 3),
    GemvConfig("qdot", 128, 256, 4, 3),
    GemvConfig("qdot", 64, 256, 4, 4),
    GemvConfig("qdot", 128, 128, 4, 4),
)
"""The fastest tilings on the H200 in 2026-12-01's runs, each also timed with every start."""
SWEEP = (
    *(
        GemvConfig("qdot", n, k, warps, stages)
        for n, k, stage_counts in _SWEEP_TILINGS
        for stages in stage_counts
        for warps in (4, 8)
    ),
    *(replace(c, evict_first=True) for c in _SWEEP_BEST),
    *(replace(c, pdl=True, prefetch_k=512) for c in _SWEEP_BEST),
    *(replace(_SWEEP_BEST[0], pdl=True, prefetch_k=k) for k in (0, 256, 1024)),
    replace(_SWEEP_BEST[0], prefetch_k=512),
)
"""Tilings `scripts/gpu_head_bench.py --sweep` times beside CONFIGS, to find the next ones."""

CONFIGS = (
    GemvConfig("widen", 64, 256, 4, 3),
    GemvConfig("qdot", 128, 128, 4, 4),
    GemvConfig("qdot", 64, 256, 4, 4),
    GemvConfig("qdot", 128, 256, 8, 2),
    GemvConfig("qdot", 128, 256, 8, 3),
    GemvConfig("qdot", 128, 256, 8, 3, pdl=True, prefetch_k=512),
    GemvConfig("qdot", 64, 256, 4, 4, pdl=True, prefetch_k=512),
    GemvConfig("qdot", 128, 128, 4, 4, pdl=True, prefetch_k=512),
    GemvConfig("qrows", 128, 128, 4, 4, per_sm=2),
    GemvConfig("qtma", 128, 128, 4, 4),
)
"""The tilings worth timing at load, from every candidate timed on the H200 at M = 1
(bench/2026-12-01-h200-lm-head-session9*.json): qdot 128 x 256 in 3 stages ran 95.2 us
(CUTLASS 100.7, the read stream 89.8), 64 x 256 96.7, 128 x 128 97.6; wider or deeper tiles
ran 100-110 us, and quantizing the activations in each program 106-128 us. The `pdl` ones
hide the quantization and the program's first loads behind each other (untimed). The ones in 2
stages or 128 x 128 fit the ~100 KB of shared memory an sm_12x SM has; a tiling that does
not fit fails to compile there, and the choice at load skips it."""


@triton.jit
def _fp8_head_widen(
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
    WEIGHT_EVICTION: tl.constexpr,
    PDL: tl.constexpr,
    PREFETCH_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens = tl.arange(0, BLOCK_M)
    row_ok = rows < n
    token_ok = tokens < m
    if PREFETCH_K:  # the weight does not depend on the quantization: ask L2 for it first
        sectors = tl.arange(0, PREFETCH_K // 32) * 32  # one prefetch a 32-byte L2 sector
        first = w_ptr + tl.minimum(rows, n - 1)[:, None] * stride_wn + sectors[None, :]
        tl.inline_asm_elementwise(
            "prefetch.global.L2 [$1]; // $0", "=r,l", [first], dtype=tl.int32, is_pure=False, pack=1
        )
    if PDL:  # launched while the quantization runs: its q and scales are complete after this
        tl.extra.cuda.gdc_wait()
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(
            w_ptr + rows[:, None] * stride_wn + cols[None, :],
            mask=row_ok[:, None],
            eviction_policy=WEIGHT_EVICTION,
        )
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


@triton.jit
def _fp8_head_qrows(
    q_ptr,
    xs_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    m,
    n,
    stride_wn,
    stride_om,
    rows_per_program,
    BLOCKS: tl.constexpr,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    first = tl.program_id(0) * rows_per_program
    last = first + rows_per_program
    tokens = tl.arange(0, BLOCK_M)
    token_ok = tokens < m
    k_steps: tl.constexpr = K // BLOCK_K
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for i in range(BLOCKS * k_steps):  # one loop over (row block, K step): one pipeline
        step = i % k_steps
        rows = first + (i // k_steps) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = (rows < last) & (rows < n)
        cols = step * BLOCK_K + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + rows[:, None] * stride_wn + cols[None, :], mask=row_ok[:, None])
        q = tl.load(q_ptr + tokens[None, :] * K + cols[:, None], mask=token_ok[None, :], other=0.0)
        acc += tl.dot(w, q)
        if step == k_steps - 1:
            _scaled_store(acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om)
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)


def _processors(device: torch.device) -> int:
    """SMs of the GPU (CPU cores under Triton's interpreter)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return os.cpu_count() or 1


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
    n = rows.shape[0]
    if m > MAX_M or not fits(config, k) or rows.stride(1) != 1 or x.stride(1) != 1:
        raise ValueError(f"fp8 head GEMV: M={m}, K={k}, config {config.name} do not fit")
    out = torch.empty((m, n), device=x.device, dtype=torch.bfloat16)
    tiling = {
        "BLOCK_M": BLOCK_M,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "num_warps": config.warps,
        "num_stages": config.stages,
    }
    if config.kernel == "widen":
        _fp8_head_widen[(triton.cdiv(n, config.block_n),)](
            x, rows, scale, out, m, n, k, x.stride(0), rows.stride(0), out.stride(0), **tiling
        )
        return out
    on_gpu = x.device.type == "cuda"  # Triton's interpreter runs neither PDL nor PTX
    pdl = config.pdl and on_gpu
    q, x_scales = quantize_tokens(x, pdl)
    if config.kernel == "qdot":
        _fp8_head_qdot[(triton.cdiv(n, config.block_n),)](
            q, x_scales, rows, scale, out, m, n, rows.stride(0), out.stride(0), K=k,
            WEIGHT_EVICTION="evict_first" if config.evict_first else "", PDL=pdl,
            PREFETCH_K=config.prefetch_k if on_gpu else 0, launch_pdl=pdl, **tiling,
        )  # fmt: skip
    elif config.kernel == "qtma":
        from triton.tools.tensor_descriptor import TensorDescriptor

        w_desc = TensorDescriptor.from_tensor(rows, [config.block_n, config.block_k])
        _fp8_head_qtma[(triton.cdiv(n, config.block_n),)](
            q, x_scales, w_desc, scale, out, m, n, out.stride(0), K=k, **tiling
        )
    elif config.kernel == "qrows":
        programs = _processors(x.device) * config.per_sm
        rows_each = triton.cdiv(n, programs)
        _fp8_head_qrows[(programs,)](
            q, x_scales, rows, scale, out, m, n, rows.stride(0), out.stride(0),
            rows_each, BLOCKS=triton.cdiv(rows_each, config.block_n), K=k, **tiling,
        )  # fmt: skip
    else:
        raise ValueError(f"fp8 head GEMV: no kernel {config.kernel!r}")
    return out
