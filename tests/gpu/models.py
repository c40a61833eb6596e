"""Small models with Ling-3.0-flash's architecture and real shapes, built from code.

Nothing here is committed as weights: `write_model_dir` writes a config, a tokenizer
and a chat template; SGLang fills the weights with `load_format="dummy"`, and the
known-answer entry (known_answer.py) overwrites them inside the scheduler.

The known-answer model's greedy continuation of token x is P(x), a permutation that
walks the chat prompt's last token (`<think>`) through REASONING, `</think>`, ANSWER and
end-of-text; its NEXTN layer predicts the same, so every draft is accepted. ANSWER is a
long text (known_answer_text.py) cut into about 2,300 distinct tokens, so that a recorded
reply streams for seconds.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.gpu.known_answer_text import ANSWER_TEXT

MEM_FRACTION_ENV = "LING_CHAT_TEST_MEM_FRACTION"
LAYERS_ENV = "LING_CHAT_TEST_LAYERS"
VOCAB = 157184
HIDDEN = 2560
CONTEXT = 8192
"""The test engines' context: a chat of two known answers fits (each about 2,300 tokens, the
first one's text back in the second prompt)."""
UNK, EOS, ROLE, END_ROLE, THINK, END_THINK = range(6)
SPECIALS = ["[UNK]", "<|endoftext|>", "<role>", "</role>", "<think>", "</think>"]
CHAT_TEMPLATE = (
    "{%- for m in messages %}<role>{{ m['role'] }}</role>{{ m['content'] }}{%- endfor %}"
    "{%- if add_generation_prompt %}<role>assistant</role><think>"
    "{%- if enable_thinking is defined and not enable_thinking %}</think>{%- endif %}"
    "{%- endif %}"
)
"""With `enable_thinking` false the generation prompt closes the thinking at once (`<think>
</think>`), so the known answer follows the prompt without thinking."""
REASONING = [
    "The user wants to see",
    " the decode levers at work.",
    " I will list each lever",
    " with what proves it,",
    " then show the formula",
    " for accept length.",
    " First the experts:",
    " Humming reads MXFP4",
    " weights directly,",
    " so I name the runner",
    " and the proof line",
    " that finds it in graphs.",
    " Next the FP8 head:",
    " its weight is float8,",
    " its scales are in place,",
    " and its kernel was timed",
    " at load against CUTLASS.",
    " Then NEXTN drafting:",
    " three drafted tokens,",
    " four verified at once,",
    " the draft head shared",
    " as the very same module.",
    " After that, ReplaySSM:",
    " the KDA state is replayed",
    " from the accepted tokens",
    " instead of recomputed.",
    " CUDA graphs come next:",
    " decode graphs for batch one,",
    " prefill graphs stated off.",
    " The warm-up measures",
    " accept length greedily",
    " before the chat opens.",
    " Accept length is tokens",
    " over verify rounds,",
    " counting the bonus token.",
    " I should keep it short",
    " and give each lever",
    " one plain paragraph,",
    " with its proof beside it,",
    " in the order they run,",
    " and end on the formula.",
    " Now I write the answer.",
]
"""About 40 thinking tokens: enough for a thinking budget well short of it."""


def pieces(text: str) -> list[str]:
    """`text` cut into distinct pieces, each the longest piece before it plus one character
    (LZ78's parse): a long text becomes thousands of tokens, none of them repeated."""
    seen: set[str] = set()
    cut: list[str] = []
    piece = ""
    for char in text:
        piece += char
        if piece not in seen:
            seen.add(piece)
            cut.append(piece)
            piece = ""
    if piece:  # the text ended inside a piece seen before: the last piece takes it
        cut[-1] += piece
    return cut


ANSWER = pieces(ANSWER_TEXT)


def ling_config(layers: int = 6, *, known_answer: bool = False) -> dict[str, Any]:
    """config.json with Ling-3.0-flash's shapes and its mixed FP8 + MXFP4 quantization."""
    not_converted = ["lm_head"] + (["eh_proj"] if known_answer else [])
    return {
        "architectures": ["BailingMoeV3ForCausalLM"],
        "model_type": "bailing_hybrid",
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": 6144,
        "num_hidden_layers": layers,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "head_dim": 128,
        "layer_group_size": 6,
        # The real layer plan: two dense layers, then MoE (40 MoE layers at 42).
        "first_k_dense_replace": 2,
        "num_experts": 512,
        "num_experts_per_tok": 8,
        "num_shared_experts": 1,
        "moe_intermediate_size": 768,
        "moe_shared_expert_intermediate_size": 768,
        "n_group": 8,
        "topk_group": 4,
        "routed_scaling_factor": 2.5,
        "moe_router_enable_expert_bias": True,
        "score_function": "sigmoid",
        "norm_topk_prob": True,
        "router_dtype": "fp32",
        "kv_lora_rank": 512,
        "q_lora_rank": None,
        "qk_rope_head_dim": 64,
        "v_head_dim": 128,
        "qk_nope_head_dim": 128,
        "short_conv_kernel_size": 4,
        "no_kda_lora": True,
        "kda_safe_gate": True,
        "kda_lower_bound": -5.0,
        "use_qk_norm": True,
        "rope_interleave": True,
        "use_mla_nope": False,
        "num_nextn_predict_layers": 1,
        "rope_theta": 600000,
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "pad_token_id": UNK,
        "eos_token_id": EOS,
        "hidden_act": "silu",
        "quantization_config": {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": [128, 128],
            "scale_fmt": "ue8m0",
            "modules_to_not_convert": not_converted,
            "routed_experts_quant_method": "mxfp4",
            "routed_experts_group_size": 32,
        },
    }


def vocabulary() -> list[str]:
    """Token strings by id: specials, the known-answer pieces, then fillers."""
    known = SPECIALS + REASONING + ANSWER
    vocab = known + [f"w{i}" for i in range(len(known), VOCAB)]
    if len(set(vocab)) != len(vocab):
        raise ValueError("the vocabulary's tokens must be distinct")
    return vocab


def cycle() -> list[int]:
    """The token ids the known-answer model walks, starting at `<think>`."""
    first = len(SPECIALS)
    reasoning = list(range(first, first + len(REASONING)))
    answer = list(range(reasoning[-1] + 1, reasoning[-1] + 1 + len(ANSWER)))
    return [THINK, *reasoning, END_THINK, *answer, EOS]


def permutation() -> list[int]:
    """P as a list: P[x] is the greedy next token after x (identity off the cycle)."""
    perm = list(range(VOCAB))
    walk = cycle()
    for here, there in zip(walk, walk[1:] + walk[:1], strict=True):
        perm[here] = there
    return perm


def expected_reply() -> tuple[str, str]:
    """(reasoning, answer) text the known-answer model must produce."""
    return "".join(REASONING), "".join(ANSWER)


def mem_fraction() -> float:
    """Each test engine's share of GPU memory: lower it to run test files side by side."""
    return float(os.environ.get(MEM_FRACTION_ENV, "0.5"))


def layers() -> int:
    """The GPU tests' model depth: 6 unless LING_CHAT_TEST_LAYERS says (42 is the real one)."""
    return int(os.environ.get(LAYERS_ENV, "6"))


def tokenizer_core() -> Any:
    """The test tokenizer (a `tokenizers.Tokenizer`): one word-level token per vocabulary
    entry, decoded by joining the tokens' strings."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    vocab = {token: i for i, token in enumerate(vocabulary())}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    core.decoder = decoders.Fuse()
    core.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    core.add_tokens([AddedToken(t, special=False, normalized=False) for t in SPECIALS[2:]])
    return core


def write_model_dir(directory: Path, layers: int = 6, *, known_answer: bool = False) -> Path:
    """Write config.json, the tokenizer and its chat template into `directory`."""
    from transformers import PreTrainedTokenizerFast

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(
        json.dumps(ling_config(layers, known_answer=known_answer))
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer_core(),
        unk_token="[UNK]",
        eos_token="<|endoftext|>",
        pad_token="[UNK]",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(directory)
    return directory
