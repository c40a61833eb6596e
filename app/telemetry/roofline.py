"""The memory-bandwidth roofline of batch-1 decode for Ling-3.0-flash (BailingMoeV3).

At batch 1 every decode step streams each active weight, the MLA latent KV cache and the
KDA recurrent state from memory once, and does ~2 FLOP per byte, so bytes / bandwidth is
a hard floor on time per token. This is the byte model of the team's research notes
(perf-anchors.md §1.3 and its appendix; not part of this repository), computed from a
config.json dict, with the formats SGLang 0.5.23 serves (spark-recipes.md §6). Units:
bytes; GB = 1e9 bytes; GB/s = 1e9 bytes/s.

Where it differs from the appendix:
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
from enum import StrEnum
from typing import Any, Final

DGX_SPARK_GBPS: Final = 273.0
"""Peak LPDDR5X bandwidth of a DGX Spark (GB10), GB/s."""

FP8_SCALE_BYTES: Final = 4
"""Bytes per FP8 scale. The checkpoint's `scale_fmt: ue8m0` scales are powers of two but
are stored as FP32 `weight_scale_inv` tensors, one per 128x128 block."""
MXFP4_SCALE_BYTES: Final = 1
"""Bytes per MXFP4 scale: one E8M0 exponent per group of 32 weights."""

_REQUIRED: Final = (
    "hidden_size",
    "num_hidden_layers",
    "layer_group_size",
    "vocab_size",
    "num_attention_heads",
    "head_dim",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
)
"""config.json fields `ModelShape.from_config` cannot do without."""


class WeightFormat(StrEnum):
    """How a weight matrix is stored, scales included."""

    BF16 = "bf16"
    FP32 = "fp32"
    FP8_BLOCK = "fp8-block"
    """E4M3, 1 byte per weight, plus one FP32 scale per block (128x128 by default)."""
    FP8_CHANNEL = "fp8-channel"
    """E4M3, 1 byte per weight, plus one FP32 scale per output row."""
    MXFP4 = "mxfp4"
    """E2M1, half a byte per weight, plus one E8M0 byte per 32 inputs of a row."""


class LmHead(StrEnum):
    """How the LM head is served; it decides the head's bytes per step."""

    BF16 = "bf16"
    FP8 = "fp8"
    """SGLANG_ENABLE_FP8_LM_HEAD: quantized online, per-channel scales."""
    FP32_LOGITS = "fp32-logits"
    """--enable-fp32-lm-head: FP32 logits from the BF16 weight, so BF16 bytes."""
    MXFP4 = "mxfp4"

    @property
    def weight_format(self) -> WeightFormat:
        """The format the head's weight is read in."""
        return {
            LmHead.BF16: WeightFormat.BF16,
            LmHead.FP8: WeightFormat.FP8_CHANNEL,
            LmHead.FP32_LOGITS: WeightFormat.BF16,
            LmHead.MXFP4: WeightFormat.MXFP4,
        }[self]


def matrix_bytes(
    rows: int,
    cols: int,
    fmt: WeightFormat,
    *,
    block: tuple[int, int] = (128, 128),
    group: int = 32,
) -> float:
    """Bytes of a `rows` (outputs) x `cols` (inputs) weight in `fmt`, scales included."""
    n = rows * cols
    if fmt is WeightFormat.BF16:
        return 2.0 * n
    if fmt is WeightFormat.FP32:
        return 4.0 * n
    if fmt is WeightFormat.FP8_BLOCK:
        blocks = math.ceil(rows / block[0]) * math.ceil(cols / block[1])
        return float(n + FP8_SCALE_BYTES * blocks)
    if fmt is WeightFormat.FP8_CHANNEL:
        return float(n + FP8_SCALE_BYTES * rows)
    return n / 2 + MXFP4_SCALE_BYTES * rows * math.ceil(cols / group)


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The config.json fields the byte model needs (BailingMoeV3, `bailing_hybrid`)."""

    hidden_size: int
    num_layers: int
    layer_group_size: int
    """Layer l is MLA iff (l + 1) % layer_group_size == 0; the rest are KDA."""
    vocab_size: int
    num_heads: int
    head_dim: int
    num_experts: int
    experts_per_tok: int
    shared_intermediate_size: int
    """Width of the one shared-expert MLP (0 without shared experts)."""
    moe_intermediate_size: int
    first_k_dense: int
    dense_intermediate_size: int
    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    nextn_layers: int = 0
    conv_kernel: int = 4
    kda_lora: bool = False
    """True when KDA's f/g projections are low-rank (`no_kda_lora` false)."""
    mla_gate_width: int = 0
    """Outputs of the MLA output-gate projection (heads for `head_wise`)."""
    expert_bias: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ModelShape:
        """Read a loaded config.json.

        Raises:
            ValueError: When a required field is missing or invalid.
        """
        if missing := [key for key in _REQUIRED if config.get(key) is None]:
            raise ValueError(f"config.json lacks {', '.join(missing)}")
        if int(config["layer_group_size"]) < 1:
            raise ValueError("config.json layer_group_size must be at least 1")
        first_k_dense = int(config.get("first_k_dense_replace") or 0)
        if first_k_dense and config.get("intermediate_size") is None:
            raise ValueError("config.json lacks intermediate_size for its dense layers")
        num_shared = int(config.get("num_shared_experts") or 0)
        shared_each = config.get("moe_shared_expert_intermediate_size")
        heads = int(config["num_attention_heads"])
        gate = config.get("gated_attention_proj_granularity_type")
        gate_width = {"head_wise": heads, "element_wise": heads * int(config["v_head_dim"])}
        q_lora = config.get("q_lora_rank")
        return cls(
            hidden_size=int(config["hidden_size"]),
            num_layers=int(config["num_hidden_layers"]),
            layer_group_size=int(config["layer_group_size"]),
            vocab_size=int(config["vocab_size"]),
            num_heads=heads,
            head_dim=int(config["head_dim"]),
            num_experts=int(config["num_experts"]),
            experts_per_tok=int(config["num_experts_per_tok"]),
            shared_intermediate_size=num_shared
            * int(shared_each or config["moe_intermediate_size"]),
            moe_intermediate_size=int(config["moe_intermediate_size"]),
            first_k_dense=first_k_dense,
            dense_intermediate_size=int(config.get("intermediate_size") or 0),
            kv_lora_rank=int(config["kv_lora_rank"]),
            q_lora_rank=int(q_lora) if q_lora else None,
            qk_nope_head_dim=int(config["qk_nope_head_dim"]),
            qk_rope_head_dim=int(config["qk_rope_head_dim"]),
            v_head_dim=int(config["v_head_dim"]),
            nextn_layers=int(config.get("num_nextn_predict_layers") or 0),
            conv_kernel=int(config.get("short_conv_kernel_size") or 4),
            kda_lora=not bool(config.get("no_kda_lora", False)),
            mla_gate_width=gate_width.get(str(gate), 0),
            expert_bias=bool(config.get("moe_router_enable_expert_bias", True)),
        )

    @property
    def mla_layers(self) -> tuple[int, ...]:
        """Indices of the full-attention (MLA) layers."""
        g = self.layer_group_size
        return tuple(i for i in range(self.num_layers) if (i + 1) % g == 0)

    @property
    def kda_layers(self) -> tuple[int, ...]:
        """Indices of the linear-attention (KDA) layers."""
        mla = set(self.mla_layers)
        return tuple(i for i in range(self.num_layers) if i not in mla)

    @property
    def moe_layers(self) -> int:
        """How many layers have a routed MoE (all after the first dense ones)."""
        return self.num_layers - self.first_k_dense

    @property
    def kda_width(self) -> int:
        """Heads x head_dim of a KDA layer."""
        return self.num_heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Elements one token occupies in one MLA layer's latent KV cache."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True)
class Precision:
    """How each part is stored; `from_config` reads the checkpoint's quantization."""

    linear: WeightFormat = WeightFormat.FP8_BLOCK
    """Attention, shared-expert, dense-MLP and MTP eh_proj linears."""
    routed_experts: WeightFormat = WeightFormat.MXFP4
    lm_head: WeightFormat = WeightFormat.BF16
    router: WeightFormat = WeightFormat.FP32
    kv_cache_bytes: float = 2.0
    """Bytes per MLA latent-cache element: 2 for BF16, 1 for FP8."""
    kda_state_bytes: float = 4.0
    """Bytes per KDA recurrent-state element: 4 for FP32 (SGLang's default), 2 for BF16."""
    conv_state_bytes: float = 2.0
    """Bytes per KDA short-conv state element (BF16)."""
    conv_filter_bytes: float = 4.0
    """Bytes per KDA short-conv filter weight: SGLang keeps them FP32."""
    mla_absorbed: WeightFormat = WeightFormat.BF16
    """The MLA `kv_b` weight as served: SGLang splits it into BF16 `w_kc`/`w_vc` at load."""
    fp8_block: tuple[int, int] = (128, 128)
    mxfp4_group: int = 32

    @classmethod
    def from_config(cls, config: Mapping[str, Any], head: LmHead | str = LmHead.BF16) -> Precision:
        """The checkpoint's formats plus the LM head as served.

        Raises:
            ValueError: For a quantization method the model does not cover.
        """
        quant = config.get("quantization_config") or {}
        method = quant.get("quant_method")
        if method is None:
            linear = WeightFormat.BF16
        elif method == "fp8":
            linear = WeightFormat.FP8_BLOCK
        else:
            raise ValueError(f"unsupported quant_method {method!r}")
        experts_method = quant.get("routed_experts_quant_method")
        if experts_method is None:
            routed = linear
        elif experts_method == "mxfp4":
            routed = WeightFormat.MXFP4
        else:
            raise ValueError(f"unsupported routed_experts_quant_method {experts_method!r}")
        block = quant.get("weight_block_size") or (128, 128)
        router = config.get("router_dtype") or "fp32"
        return cls(
            linear=linear,
            routed_experts=routed,
            lm_head=LmHead(head).weight_format,
            router=WeightFormat.BF16 if router in ("bf16", "bfloat16") else WeightFormat.FP32,
            fp8_block=(int(block[0]), int(block[1])),
            mxfp4_group=int(quant.get("routed_experts_group_size") or 32),
        )

    def matrix(self, rows: int, cols: int, fmt: WeightFormat) -> float:
        """`matrix_bytes` with this precision's block and group sizes."""
        return matrix_bytes(rows, cols, fmt, block=self.fp8_block, group=self.mxfp4_group)


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
