"""Config fixtures for the roofline tests: the real Ling-3.0-flash and a tiny hand-checked one."""

from __future__ import annotations

from typing import Any

import pytest

LING_3_FLASH_CONFIG: dict[str, Any] = {
    # The fields of inclusionAI/Ling-3.0-flash-fp4's config.json that the byte model reads,
    # as listed in shared/research/perf-anchors.md §1.1-1.2.
    "model_type": "bailing_hybrid",
    "hidden_size": 2560,
    "num_hidden_layers": 42,
    "layer_group_size": 6,
    "vocab_size": 157184,
    "tie_word_embeddings": False,
    "num_attention_heads": 32,
    "head_dim": 128,
    "first_k_dense_replace": 2,
    "intermediate_size": 6144,
    "num_experts": 512,
    "num_experts_per_tok": 8,
    "num_shared_experts": 1,
    "moe_intermediate_size": 768,
    "moe_shared_expert_intermediate_size": 768,
    "n_group": 8,
    "topk_group": 4,
    "kv_lora_rank": 512,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "num_nextn_predict_layers": 1,
    "short_conv_kernel_size": 4,
    "no_kda_lora": True,
    "kda_safe_gate": True,
    "gated_attention_proj_granularity_type": "head_wise",
    "router_dtype": "fp32",
    "quantization_config": {
        "quant_method": "fp8",
        "fmt": "e4m3",
        "activation_scheme": "dynamic",
        "weight_block_size": [128, 128],
        "scale_fmt": "ue8m0",
        "modules_to_not_convert": ["model.visual", "linear_proj", "lm_head"],
        "routed_experts_quant_method": "mxfp4",
        "routed_experts_group_size": 32,
    },
}

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
