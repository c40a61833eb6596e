"""SGLang 0.5.23's attention backends, as its source lists them: what the levers run on.

Read from the sglang 0.5.23 wheel (paths under `sglang/srt/`). Only NVIDIA's backends are
listed: ling-chat runs on CUDA GPUs.
"""

from __future__ import annotations

from typing import Final

from app.levers.lever import Package

MLA_ATTENTION: Final = frozenset(
    {"triton", "torch_native", "flex_attention", "fa3", "fa4", "flashinfer", "flashmla"}
    | {"trtllm_mla", "cutedsl_mla"}
)
"""The backends that build attention for an MLA model such as Ling-3.0-flash: the common and
NVIDIA ones of `ATTENTION_BACKEND_CHOICES` (arg_groups/choices.py), less those that refuse an
MLA model (`trtllm_mha`, `hpc_ops`, `llada2_cfg_flashinfer` in
layers/attention/attention_registry.py), the sparse backends of other models (`dsa`, `nsa`,
`qsa`, `dsv4`, `compressed`, `minicpm_*`) and the deprecated alias `tokenspeed_mla`."""
GRAPHLESS_ATTENTION: Final = frozenset({"torch_native", "flex_attention"})
"""Backends on which SGLang turns every CUDA graph off (arg_groups/attention_hook.py,
`handle_attention_backend_compatibility`)."""
GRAPH_ATTENTION: Final = MLA_ATTENTION - GRAPHLESS_ATTENTION
EAGLE_ATTENTION: Final = MLA_ATTENTION & frozenset(
    {"flashinfer", "triton", "fa3", "fa4", "flashmla", "trtllm_mha", "trtllm_mla", "cutedsl_mla"}
)
"""Backends the NEXTN (EAGLE) draft's multi-step decode and its extend run on: the NVIDIA
entries of both backend maps of speculative/draft_utils.py's `DraftBackendFactory` (any other
raises `EAGLE is not supported in decode attention backend ...` once the weights are loaded),
on an MLA model."""
SPECULATIVE_ATTENTION: Final = MLA_ATTENTION - {"flex_attention"}
"""Backends any speculative algorithm runs on: SGLang asserts that flex attention has none
(arg_groups/attention_hook.py)."""
DRAFT_ATTENTION: Final = frozenset({"flashinfer", "fa3", "fa4", "triton"})
"""`speculative_draft_attention_backend` values for an MLA draft: `DRAFT_ATTENTION_BACKEND_CHOICES`
(arg_groups/choices.py) on NVIDIA, less `trtllm_mha`, which refuses an MLA model."""
ATTENTION_KEYS: Final = (
    "attention_backend",
    "decode_attention_backend",
    "prefill_attention_backend",
)
"""The server arguments that choose the target's attention backend (prefill and decode
default to `attention_backend`)."""
REPLAYSSM_LINEAR_DECODE: Final = frozenset({"triton", "flashinfer"})
"""The KDA decode backends ReplaySSM's verify runs on: `--enable-linear-replayssm-spec requires
the triton or flashinfer linear-attn decode backend` (arg_groups/attention_hook.py)."""
REPLAYSSM_LINEAR_BASE: Final = REPLAYSSM_LINEAR_DECODE | {"flashkda"}
"""`linear_attn_backend` values whose decode is one of those: FlashKDA is prefill-only, its
decode falls back to Triton (the same hook)."""


def attention(allowed: frozenset[str]) -> dict[str, frozenset[str]]:
    """`RunsOn.settings` for these attention backends, under each argument that picks one."""
    return {key: allowed for key in ATTENTION_KEYS}


FLASHINFER: Final = Package(
    "flashinfer", "flashinfer-python", "pip install flashinfer-python (SGLang 0.5.23's own)"
)
"""FlashInfer: the recipe's MXFP4 MoE kernels and the NEXTN verify's sampling."""
