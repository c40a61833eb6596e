"""What the byte model reads from a config.json: the model's shape and its weights' formats.

The formats are those SGLang 0.5.23 serves (docs/byte-model.md), scales included. Units: bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

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
