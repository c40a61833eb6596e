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
- `qtma` is `qdot` with the weight tiles copied by the tensor memory accelerator (TMA);
- `qstream` is stream-K: `per_sm` programs an SM split the (row block, K step) units
  equally, and add the partial sums of a block split between two into zeroed FP32 logits;
- `qsplit` is split-K: `splits` programs a row block, each over its slice of K, store FP32
  partial sums, which a second kernel adds in a fixed order and scales.
`qdot`, `qstream` and `qsplit` can also start early (`pdl`): launched as a programmatic
dependent launch while the quantization runs, their programs wait for the quantized
activations at their first use (`qdot`'s `peel`: after loading their first weight tile,
which does not depend on them); `qsplit`'s sum of partials in turn launches while its GEMV
runs, and waits for it.
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
REDUCE_BLOCK = 1024
"""Logits a program of `qsplit`'s sum of partials: 154 programs for the head's row at M = 1."""


@dataclass(frozen=True, slots=True)
class GemvConfig:
    """One kernel and tiling: output rows per program, K per step, warps, pipeline stages;
    for `qrows` and `qstream` the programs an SM; for `qsplit` the slices of K; for `qdot`,
    `qstream` and `qsplit` whether it launches while the quantization runs; for `qdot`
    whether it loads its first weight tile before it waits for the quantization."""

    kernel: str
    block_n: int
    block_k: int
    warps: int
    stages: int
    per_sm: int = 1
    pdl: bool = False
    peel: bool = False
    splits: int = 1

    @property
    def name(self) -> str:
        tiling = f"{self.block_n}x{self.block_k}w{self.warps}s{self.stages}"
        tiling += f"p{self.per_sm}" if self.kernel in ("qrows", "qstream") else ""
        tiling += f"k{self.splits}" if self.kernel == "qsplit" else ""
        tiling += "+pdl" if self.pdl else ""
        tiling += "+peel" if self.peel else ""
        return f"{self.kernel}[{tiling}]"


_SWEEP_TILINGS = (
    (64, 256, (3, 4, 6)),
    (64, 512, (2,)),
    (128, 128, (4, 6)),
    (128, 256, (2, 3, 4)),
    (256, 128, (3, 4)),
)
_STREAM_TILINGS = (  # BLOCK_N, BLOCK_K, stages, programs an SM
    (128, 256, (2, 3), (2,)),  # 3 stages: 116 KB of shared memory, one program an H200 SM
    (64, 256, (3, 4), (2, 3)),
    (128, 128, (3, 4), (2, 3)),
)
_SPLIT_TILINGS = (  # BLOCK_N, BLOCK_K, warps, stages, K slices (of the head's 2,560)
    (128, 256, (4, 8), (2,), (2, 5)),  # 5 slices: 6,140 programs of 64 KB, as the read pass
    (128, 256, (8,), (3,), (2, 5)),
    (64, 256, (4,), (2, 3), (2, 5)),
    (128, 128, (4,), (3,), (2, 4, 5)),
)
SWEEP = (
    tuple(
        GemvConfig("qdot", n, k, warps, stages, pdl=pdl, peel=peel)
        for n, k, stage_counts in _SWEEP_TILINGS
        for stages in stage_counts
        for warps in (4, 8)
        for pdl, peel in ((False, False), (True, False), (True, True))
    )
    + tuple(
        GemvConfig("qstream", n, k, warps, stages, per_sm=per_sm, pdl=True)
        for n, k, stage_counts, per_sm_counts in _STREAM_TILINGS
        for stages in stage_counts
        for per_sm in per_sm_counts
        for warps in (4, 8)
    )
    + tuple(
        GemvConfig("qsplit", n, k, warps, stages, pdl=True, splits=splits)
        for n, k, warp_counts, stage_counts, split_counts in _SPLIT_TILINGS
        for warps in warp_counts
        for stages in stage_counts
        for splits in split_counts
    )
)
"""Tilings `scripts/gpu_head_bench.py --sweep` times beside CONFIGS, to find the next ones."""

CONFIGS = (
    GemvConfig("widen", 64, 256, 4, 3),
    GemvConfig("qdot", 128, 128, 4, 4),
    GemvConfig("qdot", 64, 256, 4, 4),
    GemvConfig("qdot", 128, 256, 8, 2),
    GemvConfig("qdot", 128, 256, 8, 3),
    GemvConfig("qdot", 128, 256, 8, 3, pdl=True),
    GemvConfig("qdot", 128, 256, 8, 3, pdl=True, peel=True),
    GemvConfig("qdot", 64, 256, 4, 4, pdl=True),
    GemvConfig("qdot", 128, 128, 4, 4, pdl=True),
    GemvConfig("qrows", 128, 128, 4, 4, per_sm=2),
    GemvConfig("qtma", 128, 128, 4, 4),
)
"""The tilings worth timing at load, from every candidate timed on the H200 at M = 1
(bench/2026-12-01-h200-lm-head-session{9,10}*.json): qdot 128 x 256 in 3 stages ran 95.2 us
and 94.2 us launched as a dependent of the quantization (`pdl`; CUTLASS 100.7, the read
stream 89.7); 64 x 256 96.5, 128 x 128 98.1; wider or deeper tiles ran 100-110 us,
quantizing the activations in each program 106-128 us; evicting the weight's lines from L2
first or asking L2 for each row's first bytes before the wait did not gain. `peel` is
untimed. A tiling that does not fit an sm_12x SM's ~100 KB of shared memory fails to compile
there, and the choice at load skips it."""


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
def _scaled_store(
    acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om, ADD: tl.constexpr
):
    """acc [rows, tokens] times both scales, stored as BF16 logits [tokens, rows]; with ADD,
    added into FP32 logits instead (`qstream`'s partial sums)."""
    token_ok = tokens < m
    scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
    x_scale = tl.load(xs_ptr + tokens, mask=token_ok, other=0.0)
    out = out_ptr + tokens[None, :] * stride_om + rows[:, None]
    result = acc * scale[:, None] * x_scale[None, :]
    mask = row_ok[:, None] & token_ok[None, :]
    if ADD:
        tl.atomic_add(out, result, mask=mask, sem="relaxed")
    else:
        tl.store(out, result.to(tl.bfloat16), mask=mask)


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
    PEEL: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens = tl.arange(0, BLOCK_M)
    row_ok = rows < n
    token_ok = tokens < m
    w_rows = w_ptr + rows[:, None] * stride_wn
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if PEEL:  # the first weight tile does not depend on the quantization: load it first
        w = tl.load(w_rows + tl.arange(0, BLOCK_K)[None, :], mask=row_ok[:, None])
    if PDL:  # launched while the quantization runs: q and its scales are complete after this
        tl.extra.cuda.gdc_wait()
    if PEEL:
        cols = tl.arange(0, BLOCK_K)
        q = tl.load(q_ptr + tokens[None, :] * K + cols[:, None], mask=token_ok[None, :], other=0.0)
        acc = tl.dot(w, q, acc)
    for k0 in range(BLOCK_K * PEEL, K, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_rows + cols[None, :], mask=row_ok[:, None])
        q = tl.load(q_ptr + tokens[None, :] * K + cols[:, None], mask=token_ok[None, :], other=0.0)
        acc += tl.dot(w, q)
    _scaled_store(acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om, False)


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
    _scaled_store(acc, rows, rows < n, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om, False)


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
            _scaled_store(
                acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om, False
            )
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)


@triton.jit
def _fp8_head_qstream(
    q_ptr,
    xs_ptr,
    w_ptr,
    scale_ptr,
    out_ptr,
    m,
    n,
    stride_wn,
    stride_om,
    units,
    programs,
    RUN: tl.constexpr,
    K: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    """Stream-K: the units (row block, K step), row block major, split into equal runs, one
    a program, in one loop. The accumulator holds one block's partial sum; at the block's
    last K step or the run's end it is scaled and added into the FP32 logits [tokens, rows].
    The loop takes the longest run's RUN steps (a compile-time count, which Triton's
    interpreter needs too); a run one unit shorter masks its last step.
    Every run is at least a block long, so a block is split between two programs at most,
    and each logit receives at most two additions onto zero: FP32 a + b onto 0 gives the
    same bits in either order, and the result is deterministic."""
    program = tl.program_id(0)
    first = program * units // programs
    last = (program + 1) * units // programs
    tokens = tl.arange(0, BLOCK_M)
    token_ok = tokens < m
    k_steps: tl.constexpr = K // BLOCK_K
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if PDL:  # launched while the quantization runs: q and its scales are complete after this
        tl.extra.cuda.gdc_wait()
    for i in range(RUN):
        unit = first + i
        live = unit < last
        step = unit % k_steps
        rows = (unit // k_steps) * BLOCK_N + tl.arange(0, BLOCK_N)
        row_ok = rows < n
        cols = step * BLOCK_K + tl.arange(0, BLOCK_K)
        w_ok = row_ok[:, None] & live
        w = tl.load(w_ptr + rows[:, None] * stride_wn + cols[None, :], mask=w_ok)
        q_ok = token_ok[None, :] & live
        q = tl.load(q_ptr + tokens[None, :] * K + cols[:, None], mask=q_ok, other=0.0)
        acc += tl.dot(w, q)
        if live & ((step == k_steps - 1) | (unit == last - 1)):
            _scaled_store(acc, rows, row_ok, tokens, m, scale_ptr, xs_ptr, out_ptr, stride_om, True)
            acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)


@triton.jit
def _fp8_head_qsplit(
    q_ptr,
    w_ptr,
    partials_ptr,
    m,
    n,
    stride_wn,
    stride_ps,
    stride_pm,
    K: tl.constexpr,
    SPLITS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PDL: tl.constexpr,
):
    """Split-K: program (b, s) multiplies row block b over the K slice s (K / SPLITS
    columns) and stores its unscaled FP32 partial sums [tokens, rows] at partials[s].
    With PDL, the sum of the partials launched as its dependent may start at once (it
    waits for this kernel's end itself)."""
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()
    split = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    tokens = tl.arange(0, BLOCK_M)
    row_ok = rows < n
    token_ok = tokens < m
    span: tl.constexpr = K // SPLITS
    w_rows = w_ptr + rows[:, None] * stride_wn + split * span
    q_cols = q_ptr + tokens[None, :] * K + split * span
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if PDL:  # launched while the quantization runs: q is complete after this
        tl.extra.cuda.gdc_wait()
    for k0 in range(0, span, BLOCK_K):
        cols = k0 + tl.arange(0, BLOCK_K)
        w = tl.load(w_rows + cols[None, :], mask=row_ok[:, None])
        q = tl.load(q_cols + cols[:, None], mask=token_ok[None, :], other=0.0)
        acc += tl.dot(w, q)
    out = partials_ptr + split * stride_ps + tokens[None, :] * stride_pm + rows[:, None]
    tl.store(out, acc, mask=row_ok[:, None] & token_ok[None, :])


@triton.jit
def _fp8_head_reduce(
    partials_ptr,
    xs_ptr,
    scale_ptr,
    out_ptr,
    m,
    n,
    stride_ps,
    stride_pm,
    stride_om,
    SPLITS: tl.constexpr,
    BLOCK: tl.constexpr,
    PDL: tl.constexpr,
):
    """Program (b, t): token t's logits in row block b, the sum of the SPLITS partials in
    the order s = 0, 1, ... (deterministic), times both scales, as BF16. With PDL it waits
    for the GEMV to end (which waited for the quantization, which may still run when this
    starts: the token scales are read after the wait too)."""
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    token = tl.program_id(1)
    row_ok = rows < n
    scale = tl.load(scale_ptr + rows, mask=row_ok, other=0.0)
    if PDL:  # the partials, and the token scales before them, are complete after this
        tl.extra.cuda.gdc_wait()
    x_scale = tl.load(xs_ptr + token)
    partials = partials_ptr + token * stride_pm + rows
    acc = tl.load(partials, mask=row_ok, other=0.0)
    for s in tl.static_range(1, SPLITS):
        acc += tl.load(partials + s * stride_ps, mask=row_ok, other=0.0)
    result = acc * scale * x_scale
    tl.store(out_ptr + token * stride_om + rows, result.to(tl.bfloat16), mask=row_ok)


def _processors(device: torch.device) -> int:
    """SMs of the GPU (CPU cores under Triton's interpreter)."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return os.cpu_count() or 1


def fits(config: GemvConfig, k: int) -> bool:
    """The kernel steps K in whole blocks (the head's K is 2,560), each of its `splits`
    slices of K in as many."""
    return (
        k % config.block_k == 0
        and config.splits >= 1
        and (k // config.block_k) % config.splits == 0
    )


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
    if config.kernel == "widen":
        out = torch.empty((m, rows.shape[0]), device=x.device, dtype=torch.bfloat16)
        _fp8_head_widen[(triton.cdiv(rows.shape[0], config.block_n),)](
            x, rows, scale, out, m, rows.shape[0], k, x.stride(0), rows.stride(0), out.stride(0),
            **_tiling(config),
        )  # fmt: skip
        return out
    # qstream adds into zeros, made before the quantization so that a `pdl` launch follows it
    n = rows.shape[0]
    sums = torch.zeros((m, n), device=x.device) if config.kernel == "qstream" else None
    q, x_scales = quantize_tokens(x, _pdl(config, x.device))
    return quantized_gemv(q, x_scales, rows, scale, config, sums=sums)


def quantized_gemv(
    q: torch.Tensor,
    x_scales: torch.Tensor,
    rows: torch.Tensor,
    scale: torch.Tensor,
    config: GemvConfig,
    sums: torch.Tensor | None = None,
) -> torch.Tensor:
    """`gemv` after the quantization: q [M, K] FP8 (contiguous), x_scales [M] FP32.
    `qstream` adds into `sums`, FP32 zeros [M, N] (made here when None), and returns them
    as BF16, in one more small elementwise kernel. `qsplit` stores its slices' partial sums
    in FP32 scratch [splits, M, N] and adds them in a kernel of its own."""
    m, k = q.shape
    n = rows.shape[0]
    tiling = _tiling(config)
    if config.kernel == "qstream":
        programs = _processors(q.device) * config.per_sm
        k_steps = k // config.block_k
        units = triton.cdiv(n, config.block_n) * k_steps
        if units // programs < k_steps:
            blocks = units // k_steps
            raise ValueError(
                f"fp8 head GEMV: {config.name} needs a row block a program, N={n} has"
                f" {blocks} blocks for {programs} programs"
            )
        if sums is None:
            sums = torch.zeros((m, n), device=q.device)
        pdl = _pdl(config, q.device)
        _fp8_head_qstream[(programs,)](
            q, x_scales, rows, scale, sums, m, n, rows.stride(0), sums.stride(0), units,
            programs, RUN=triton.cdiv(units, programs), K=k, PDL=pdl, launch_pdl=pdl, **tiling,
        )  # fmt: skip
        return sums.to(torch.bfloat16)
    out = torch.empty((m, n), device=q.device, dtype=torch.bfloat16)
    if config.kernel == "qsplit":
        if not fits(config, k):
            steps = k // config.block_k
            raise ValueError(f"fp8 head GEMV: {config.name} cannot split K={k}'s {steps} steps")
        partials = torch.empty((config.splits, m, n), device=q.device)
        pdl = _pdl(config, q.device)
        _fp8_head_qsplit[(triton.cdiv(n, config.block_n), config.splits)](
            q, rows, partials, m, n, rows.stride(0), partials.stride(0), partials.stride(1), K=k,
            SPLITS=config.splits, PDL=pdl, launch_pdl=pdl, **tiling,
        )  # fmt: skip
        _fp8_head_reduce[(triton.cdiv(n, REDUCE_BLOCK), m)](
            partials, x_scales, scale, out, m, n, partials.stride(0), partials.stride(1),
            out.stride(0), SPLITS=config.splits, BLOCK=REDUCE_BLOCK, PDL=pdl, launch_pdl=pdl,
            num_warps=4,
        )  # fmt: skip
    elif config.kernel == "qdot":
        pdl = _pdl(config, q.device)
        _fp8_head_qdot[(triton.cdiv(n, config.block_n),)](
            q, x_scales, rows, scale, out, m, n, rows.stride(0), out.stride(0), K=k, PDL=pdl,
            PEEL=config.peel, launch_pdl=pdl, **tiling,
        )  # fmt: skip
    elif config.kernel == "qtma":
        from triton.tools.tensor_descriptor import TensorDescriptor

        w_desc = TensorDescriptor.from_tensor(rows, [config.block_n, config.block_k])
        _fp8_head_qtma[(triton.cdiv(n, config.block_n),)](
            q, x_scales, w_desc, scale, out, m, n, out.stride(0), K=k, **tiling
        )
    elif config.kernel == "qrows":
        programs = _processors(q.device) * config.per_sm
        rows_each = triton.cdiv(n, programs)
        _fp8_head_qrows[(programs,)](
            q, x_scales, rows, scale, out, m, n, rows.stride(0), out.stride(0),
            rows_each, BLOCKS=triton.cdiv(rows_each, config.block_n), K=k, **tiling,
        )  # fmt: skip
    else:
        raise ValueError(f"fp8 head GEMV: no kernel {config.kernel!r} over FP8 activations")
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
