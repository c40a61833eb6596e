"""Config fixtures for the roofline tests: the real Ling-3.0-flash and a tiny hand-checked one."""

from __future__ import annotations

from typing import Any

import pytest

from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG

TINY_CONFIG: dict[str, Any] = {
    # Small enough to compute by hand: 4 layers, MLA at 1 and 3, KDA at 0 and 2, layer 0
    # dense, layers 1-3 MoE with 8 experts (top-2) and one shared expert.
    "model_type": "bailing_hybrid",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "layer_group_size": 2,
    "vocab_size": 1024,
    "num_attention_heads": 2,
    "head_dim": 128,
    "first_k_dense_replace": 1,
    "intermediate_size": 128,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "num_shared_experts": 1,
    "moe_intermediate_size": 64,
    "moe_shared_expert_intermediate_size": 64,
    "kv_lora_rank": 128,
    "q_lora_rank": None,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
    "short_conv_kernel_size": 4,
    "no_kda_lora": True,
    "gated_attention_proj_granularity_type": "head_wise",
    "router_dtype": "fp32",
    "moe_router_enable_expert_bias": False,
    "quantization_config": {
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
        "routed_experts_quant_method": "mxfp4",
        "routed_experts_group_size": 32,
    },
}


@pytest.fixture
def ling_config() -> dict[str, Any]:
    """A fresh copy of the real model's config fields."""
    return {
        **LING_3_FLASH_CONFIG,
        "quantization_config": {**LING_3_FLASH_CONFIG["quantization_config"]},
    }


@pytest.fixture
def tiny_config() -> dict[str, Any]:
    """A fresh copy of the tiny config."""
    return {**TINY_CONFIG, "quantization_config": {**TINY_CONFIG["quantization_config"]}}
