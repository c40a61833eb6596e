"""The memory-bandwidth roofline of batch-1 decode for Ling-3.0-flash (BailingMoeV3).

At batch 1 every decode step streams each active weight, the MLA latent KV cache and the
KDA recurrent state from memory once, and does ~2 FLOP per byte, so bytes / bandwidth is
a hard floor on time per token. This is the byte model that docs/byte-model.md
derives, computed from a config.json dict, with the formats SGLang 0.5.23 serves. Units:
bytes; GB = 1e9 bytes; GB/s = 1e9 bytes/s.

Where the served formats differ from the checkpoint's:
- SGLang serves the MLA `kv_b` weight as BF16 `w_kc`/`w_vc` (dequantized at load), not
  FP8: +29.4 MB a step on the real model.
- The KDA short-conv filters are FP32: +3.4 MB a step.
- It also counts FP8 block scales (one FP32 per 128x128 block), the FP8 head's per-row
  FP32 scales, the router's expert bias, the embedding row, the norms, A_log and dt_bias
  (≈+6 MB of 4.8 GB).
It ignores activations and the one KV row / conv slot a step writes for its own token.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Final

from app.bench.bytemodel.checkpoint import LmHead, ModelShape, Precision, WeightFormat

DGX_SPARK_GBPS: Final = 273.0
"""Peak LPDDR5X bandwidth of a DGX Spark (GB10), GB/s."""


class SummedParts:
    """A record of byte counts by part whose total is their sum (mixed into the records)."""

    __slots__ = ()

    @property
    def total(self) -> float:
        """All the record's bytes."""
        return math.fsum(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class StepBytes(SummedParts):
    """Bytes one batch-1 decode step reads (state: reads and writes), by part."""

    kda_projections: float
    """KDA q/k/v/f/g/o linears plus the BF16 beta projection, all KDA layers."""
    mla_projections: float
    """MLA q/kv_a/kv_b/o linears plus the BF16 output gate, all MLA layers."""
    dense_mlp: float
    routed_experts: float
    """Only the top-k routed experts of each MoE layer."""
    shared_experts: float
    router: float
    """Router weights (and expert bias), every MoE layer."""
    norms: float
    """RMSNorm weights, KDA conv filters, A_log and dt_bias."""
    embedding: float
    """One embedding row."""
    lm_head: float
    kda_state: float
    """KDA recurrent and conv state, read and written."""
    mla_kv: float
    """The latent KV cache read at the current context length."""


def decode_step_bytes(shape: ModelShape, precision: Precision, *, context_tokens: int) -> StepBytes:
    """Bytes read by one batch-1 decode step with `context_tokens` in the KV cache."""
    s, p = shape, precision
    h = s.hidden_size
    n_kda, n_mla, n_moe = len(s.kda_layers), len(s.mla_layers), s.moe_layers
    width = s.kda_width
    if s.kda_lora:
        fg = 2 * (p.matrix(s.head_dim, h, p.linear) + p.matrix(width, s.head_dim, p.linear))
    else:
        fg = 2 * p.matrix(width, h, p.linear)
    kda_layer = (
        3 * p.matrix(width, h, p.linear)
        + fg
        + p.matrix(h, width, p.linear)
        + p.matrix(s.num_heads, h, WeightFormat.BF16)
    )
    return StepBytes(
        kda_projections=n_kda * kda_layer,
        mla_projections=n_mla * mla_projection_bytes(s, p),
        dense_mlp=s.first_k_dense * mlp_bytes(s, p, s.dense_intermediate_size, p.linear),
        routed_experts=n_moe
        * s.experts_per_tok
        * mlp_bytes(s, p, s.moe_intermediate_size, p.routed_experts),
        shared_experts=n_moe * mlp_bytes(s, p, s.shared_intermediate_size, p.linear),
        router=n_moe * router_bytes(s, p),
        norms=_norm_bytes(s, p),
        embedding=2.0 * h,
        lm_head=p.matrix(s.vocab_size, h, p.lm_head),
        kda_state=n_kda * 2 * kda_state_bytes(s, p),
        mla_kv=n_mla * context_tokens * s.kv_width * p.kv_cache_bytes,
    )


def mla_projection_bytes(shape: ModelShape, precision: Precision) -> float:
    """One MLA layer's projections (q, kv_a, kv_b as `w_kc`/`w_vc`, o, output gate)."""
    s, p, h = shape, precision, shape.hidden_size
    q_out = s.num_heads * (s.qk_nope_head_dim + s.qk_rope_head_dim)
    if s.q_lora_rank:
        q = p.matrix(s.q_lora_rank, h, p.linear) + p.matrix(q_out, s.q_lora_rank, p.linear)
    else:
        q = p.matrix(q_out, h, p.linear)
    kv_b_out = s.num_heads * (s.qk_nope_head_dim + s.v_head_dim)
    return (
        q
        + p.matrix(s.kv_width, h, p.linear)
        + p.matrix(kv_b_out, s.kv_lora_rank, p.mla_absorbed)
        + p.matrix(h, s.num_heads * s.v_head_dim, p.linear)
        + p.matrix(s.mla_gate_width, h, WeightFormat.BF16)
    )


def mlp_bytes(
    shape: ModelShape, precision: Precision, intermediate: int, fmt: WeightFormat
) -> float:
    """One gated MLP (gate, up, down) of width `intermediate`; 0 when the width is 0."""
    if intermediate <= 0:
        return 0.0
    h, p = shape.hidden_size, precision
    return 2 * p.matrix(intermediate, h, fmt) + p.matrix(h, intermediate, fmt)


def router_bytes(shape: ModelShape, precision: Precision) -> float:
    """One MoE layer's router weight, plus its FP32 expert bias when the model has one."""
    bias = 4.0 * shape.num_experts if shape.expert_bias else 0.0
    return precision.matrix(shape.num_experts, shape.hidden_size, precision.router) + bias


def kda_state_bytes(shape: ModelShape, precision: Precision) -> float:
    """One KDA layer's state, counted once: heads x head_dim² recurrent + q/k/v conv windows."""
    recurrent = shape.num_heads * shape.head_dim**2 * precision.kda_state_bytes
    conv = (shape.conv_kernel - 1) * 3 * shape.kda_width * precision.conv_state_bytes
    return recurrent + conv


def _norm_bytes(s: ModelShape, p: Precision) -> float:
    h = s.hidden_size
    n_kda, n_mla = len(s.kda_layers), len(s.mla_layers)
    bf16 = 2 * h * s.num_layers + h  # two RMSNorms a layer, plus the final norm
    bf16 += n_mla * (s.kv_lora_rank + (s.q_lora_rank or 0))  # kv_a / q_a norms
    bf16 += n_kda * s.head_dim  # o_norm
    conv_filters = n_kda * 3 * s.kda_width * s.conv_kernel
    fp32 = n_kda * (s.num_heads + s.kda_width)  # A_log, dt_bias
    return 2.0 * bf16 + p.conv_filter_bytes * conv_filters + 4.0 * fp32


def floor_time_s(nbytes: float, peak_gbps: float) -> float:
    """The bandwidth floor: seconds to stream `nbytes` at `peak_gbps`."""
    return nbytes / (peak_gbps * 1e9)


def achieved_gbps(nbytes: float, seconds: float) -> float:
    """Effective bandwidth when `nbytes` took `seconds`."""
    return nbytes / seconds / 1e9


def share_of_peak(nbytes: float, seconds: float, peak_gbps: float) -> float:
    """Achieved bandwidth as a fraction of `peak_gbps` (1.0 = at the floor)."""
    return achieved_gbps(nbytes, seconds) / peak_gbps


@dataclass(frozen=True, slots=True)
class Roofline:
    """Bytes per decode step against a memory system's peak bandwidth."""

    step: StepBytes
    peak_gbps: float

    @property
    def floor_tpot_s(self) -> float:
        """The least time per token that bandwidth allows (no MTP)."""
        return floor_time_s(self.step.total, self.peak_gbps)

    @property
    def ceiling_tps(self) -> float:
        """The most decode tokens/s that bandwidth allows (no MTP)."""
        return 1.0 / self.floor_tpot_s


def roofline(
    config: Mapping[str, Any],
    *,
    context_tokens: int,
    peak_gbps: float,
    head: LmHead | str = LmHead.BF16,
) -> Roofline:
    """The roofline of a config.json at one context length, LM head served as `head`."""
    step = decode_step_bytes(
        ModelShape.from_config(config),
        Precision.from_config(config, head),
        context_tokens=context_tokens,
    )
    return Roofline(step=step, peak_gbps=peak_gbps)
