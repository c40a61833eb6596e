"""A DSpark draft with the real draft's shapes, built from code (config only; dummy weights).

`inclusionAI/Ling-3.0-flash-dspark` is a `LingDSparkModel`: 5 Qwen3 layers (1.36B
parameters, BF16) over the target's hidden size, a Markov head, and the target's own
embedding and LM head. The fields below are the ones SGLang 0.5.23's
`dspark_config.parse_dspark_draft_config` and `models/dflash.py` read. The layer shapes
(Qwen3-4B's: 32 query heads, 8 KV heads of 128, MLP 9,728) and `markov_rank` are chosen
to give about 1.36B parameters; they have not been checked against the published
config.json (first GPU step: compare and correct them).

No known-answer variant: the draft's base logits come from its hidden state through the
target's head, and only the Markov head (a learned bigram bias) could carry a fixed
permutation. Such a draft would accept every token with the head's output at zero, so
it could not tell an FP8 head from a BF16 view of it. The head is proven instead by
identity and by ling-chat's FP8 method running in the draft's graph capture; the
accept length of random weights is only a timing row, labelled as such.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.gpu import models

DRAFT_LAYERS = 5
BLOCK = 8
MASK_TOKEN = models.UNK


def draft_config(target_layers: int) -> dict[str, Any]:
    """config.json of a DSpark draft for a target of `target_layers` layers."""
    picks = sorted({1, target_layers // 2, target_layers - 2, target_layers - 1})
    return {
        "architectures": ["LingDSparkModel"],
        "model_type": "qwen3",
        "vocab_size": models.VOCAB,
        "hidden_size": models.HIDDEN,
        "intermediate_size": 9728,
        "num_hidden_layers": DRAFT_LAYERS,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "block_size": BLOCK,
        "num_target_layers": target_layers,
        "target_layer_ids": picks,
        "mask_token_id": MASK_TOKEN,
        "markov_rank": 2560,
        "markov_head_type": "vanilla",
        "sample_from_anchor": True,
    }


def write_draft_dir(directory: Path, target_layers: int) -> Path:
    """Write the draft's config.json into `directory` (SGLang fills dummy weights)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(draft_config(target_layers)))
    return directory
