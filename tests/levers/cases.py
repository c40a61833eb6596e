"""The per-lever cases: the settings that contradict each lever, and where each is judged.

A new lever adds its cases here (the registry test fails until it does); its healthy facts
come from `tests.support.proof.HEALTHY`, on the first profile that has the lever.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.levers.lever import Lever
from app.levers.profiles import PROFILES


@dataclass(frozen=True, slots=True)
class Contradiction:
    """A start the lever refuses before anything loads: on `profile`, with these
    `--sglang-arg` pairs and variables; `named` is what the refusal names (the setting, and
    the lever as the line calls it)."""

    profile: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    on: bool = True
    """Whether the lever is on in `profile` (the refusal calls it by `called`, else
    `called_off`)."""


CONTRADICTIONS: dict[str, tuple[Contradiction, ...]] = {
    "cuda_graphs": (
        Contradiction("stack", ("attention_backend=torch_native",)),
        Contradiction("dspark", ("attention_backend=flex_attention",)),
        Contradiction("baseline", ("disable_cuda_graph=true",)),
        Contradiction("stack", env={"SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH": "1"}),
    ),
    "humming": (
        Contradiction("stack", ("moe_runner_backend=triton",)),
        Contradiction("baseline", ("moe_runner_backend=humming",), on=False),
    ),
    "fp8_head": (
        Contradiction("stack", ("enable_fp32_lm_head=true",)),
        Contradiction("dspark", env={"SGLANG_FORCE_FP8_MARLIN": "1"}),
    ),
    "fp32_head": (Contradiction("baseline", ("enable_fp32_lm_head=false",)),),
    "bf16_router": (
        Contradiction("stack+bf16-router", ("json_model_override_args=null",)),
        Contradiction("stack", ('json_model_override_args={"router_dtype": "bf16"}',), on=False),
    ),
    "nextn": (
        Contradiction("stack", ("speculative_num_steps=2",)),
        Contradiction("stack-recurrent", ("speculative_draft_attention_backend=trtllm_mha",)),
    ),
    "dspark": (Contradiction("dspark", ("speculative_dspark_block_size=4",)),),
    "fp8_draft": (
        Contradiction("dspark+fp8-draft", ("speculative_draft_model_quantization=unquant",)),
        Contradiction("dspark", ("speculative_draft_model_quantization=fp8",), on=False),
    ),
    "hot_vocab": (
        Contradiction("stack+hot-vocab", ("speculative_token_map=/m/hot.pt",)),
        Contradiction("stack+hot-vocab", ("speculative_use_rejection_sampling=true",)),
        Contradiction("stack", ("speculative_token_map=/m/hot.pt",), on=False),
    ),
    "replayssm": (
        Contradiction("stack", ("enable_linear_replayssm_spec=false",)),
        Contradiction("dspark", ("linear_attn_decode_backend=cutedsl",)),
        Contradiction("stack-recurrent", ("enable_linear_replayssm_spec=true",), on=False),
    ),
    "fast_cores": (
        Contradiction("stack", env={"SGLANG_SET_CPU_AFFINITY": "1"}),
        Contradiction("baseline", env={"SGLANG_SET_CPU_AFFINITY": "true"}),
    ),
    "no_faking": (
        Contradiction("stack", env={"SGLANG_SIMULATE_ACC_LEN": "3.5"}),
        Contradiction("baseline", env={"SGLANG_SIMULATE_UNIFORM_EXPERTS": "1"}),
    ),
    "accept_length": (Contradiction("dspark", ("speculative_accept_threshold_acc=0.5",)),),
}

UNCONTRADICTED: dict[str, str] = {
    "prepared_commit": "it sets nothing; what it needs, NEXTN's top-1 chain and ReplaySSM's "
    "ring, is refused in their names (their cases above)",
    "gc_freeze": "it sets nothing, and no setting of SGLang 0.5.23 touches the scheduler's "
    "collector after its start",
}
"""Levers that no setting contradicts, and why: they set no server argument and refuse nothing
(tests/levers/test_registry.py checks that), so no start is refused in their name."""


def home(lever: Lever) -> str:
    """The first profile with the lever: where its lines are judged."""
    return next(name for name, profile in PROFILES.items() if profile.has(lever))
