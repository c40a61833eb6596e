"""The config.json fields of inclusionAI/Ling-3.0-flash-fp4 that the byte model reads.

As docs/byte-model.md derives them: 42 layers, 2 dense and
40 MoE, MXFP4 routed experts and FP8 block-128 linears.
"""

from __future__ import annotations

from typing import Any, Final

LING_3_FLASH_CONFIG: Final[dict[str, Any]] = {
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

DSPARK_DRAFT_PARAMS: Final = 1.36e9
"""inclusionAI/Ling-3.0-flash-dspark's own parameters (BF16), as its model card gives them;
the draft shares the target's embedding and LM head."""
DSPARK_MARKOV_RANK: Final = 2560
"""The DSpark draft's `markov_rank`: its Markov head is `markov_w1` (an embedding, vocab x
rank, one row gathered a position) and `markov_w2` (a linear, vocab x rank, BF16), which
SGLang 0.5.23 (`VanillaMarkov.step_bias`, models/dspark.py) applies once per draft position.
2,560 is tests/gpu/dspark_models.py's test draft, chosen with the layer shapes below to give
the published 1.36B; inclusionAI's config.json is unchecked (a third-party summary of the
draft's GGUF gives a vanilla head of rank 256)."""
DSPARK_DRAFT_LAYERS: Final = 5
DSPARK_DRAFT_LAYER_LINEARS: Final = ((6144, 2560), (2560, 4096), (19456, 2560), (2560, 9728))
"""Each draft layer's linears as SGLang builds them, outputs x inputs: qkv (32 query and 8
KV heads of 128), o, gate_up (MLP 9,728) and down; Qwen3-4B's shapes, as
tests/gpu/dspark_models.py gives them (not checked against the published config.json).
They are the only parts `speculative_draft_model_quantization` reaches (models/dflash.py):
the draft's `fc` and Markov head are plain torch linears and stay BF16."""
