"""Refuse an `--sglang-arg` or variable that contradicts a profile's levers (pure).

Checked before anything loads, before the preflight too, so the same command is refused
the same way on any machine: a lever's setting changed, one the profile has no lever for
(SGLang would ignore a speculative setting without a speculative algorithm), and graph
switches that SGLang 0.5.23 lets ling-chat's own `cuda_graph_backend_decode="full"`
outrank, so that they would do nothing. The proof still judges the running model; this
only stops a start that cannot pass it, naming the setting instead of a symptom.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.backend.engine.config import BF16_ROUTER, FP8_DRAFT, EngineConfig, lever_args
from app.core.profiles import Levers

SPECULATIVE_KEYS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_dspark_block_size",
)
REPLAYSSM_KEYS = ("enable_linear_replayssm_spec", "linear_replayssm_cache_len")
FREE_KEYS = frozenset({"linear_replayssm_cache_len"})
"""Lever settings an override may change: the proof judges the ring (a power of two >= 2x
the verify window), and `EngineConfig` refuses one SGLang would refuse."""
SGLANG_DEFAULTS = {"enable_fp32_lm_head": False, "enable_linear_replayssm_spec": False}
"""What SGLang 0.5.23 uses for a lever setting an override hands back to it (`null`)."""
GRAPH_OFF_FLAGS = ("disable_cuda_graph", "disable_decode_cuda_graph")
"""SGLang 0.5.23's legacy switches, which the per-phase backend ling-chat sets outranks."""
ROUTER_KEY = BF16_ROUTER.name
"""Where the BF16 router lever sets the config's `router_dtype`."""
DRAFT_QUANT_KEY = FP8_DRAFT.name
GRAPHS = "the CUDA graphs lever (decode, verify and draft graphs)"
TRUE = frozenset({"1", "true", "yes", "on"})


def lever_of(key: str, levers: Levers) -> str:
    """The lever a server argument belongs to, in words."""
    if key == "moe_runner_backend":
        return "the Humming MoE lever" if levers.humming else "the recipe's FlashInfer MXFP4 MoE"
    if key == "enable_fp32_lm_head":
        return "the FP8 LM head lever" if levers.fp8_head else "the recipe's FP32 LM head"
    if key in REPLAYSSM_KEYS:
        return "the KDA ReplaySSM lever" if levers.kda_replayssm else "the recurrent KDA verify"
    if key == ROUTER_KEY:
        return "the BF16 router lever" if levers.bf16_router else "the checkpoint's FP32 router"
    if key == DRAFT_QUANT_KEY:
        return "the FP8 draft lever" if levers.fp8_draft else "the draft's own weights"
    return "the DSpark draft lever" if levers.dspark else "the NEXTN 3/1/4 lever"


def _shown(value: Any) -> str:
    """A value as `--sglang-arg` takes it: a string bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def refusal(config: EngineConfig, env: Mapping[str, str]) -> str | None:
    """The first override of `config`, or variable of `env`, that contradicts its profile's
    levers or that SGLang would drop, as one line; None when none does."""
    levers = config.levers
    own = lever_args(config)
    for key, value in config.overrides.items():
        flag = f"--sglang-arg {key}={_shown(value)}"
        effective = SGLANG_DEFAULTS.get(key) if value is None else value
        if key in own and key not in FREE_KEYS and effective != own[key]:
            if key == "speculative_draft_model_path" and levers.dspark:
                continue  # where the DSpark draft is: the --dspark-draft of an override
            return (
                f"{flag} contradicts {lever_of(key, levers)} of profile {config.profile} "
                f"(ling-chat sets {key}={_shown(own[key])})"
            )
        if key not in own and key in REPLAYSSM_KEYS and value is not None:
            return (
                f"{flag} contradicts {lever_of(key, levers)} of profile {config.profile} "
                "(the stack verifies with ReplaySSM)"
            )
        if key not in own and key in SPECULATIVE_KEYS and value is not None:
            return (
                f"{flag} does not apply to profile {config.profile}, which runs no draft "
                "model: SGLang would ignore it or start one the proof refuses"
            )
        if key not in own and (problem := _not_own_lever(key, value, levers)):
            return f"{flag} contradicts {problem} of profile {config.profile}"
        if key == "quantization" and value is not None:
            return (
                f"{flag} contradicts the checkpoint's quantization (FP8 + MXFP4 experts) that "
                "the Humming and FP8 head levers run on"
            )
        if problem := _graph_problem(key, value):
            return f"{flag} {problem}"
    return _env_problem(levers, config.profile, env)


def _not_own_lever(key: str, value: Any, levers: Levers) -> str | None:
    """The lever that an override of a lever this profile keeps off would turn on, or None:
    a BF16 router or a quantized draft."""
    if key == DRAFT_QUANT_KEY and value not in (None, "unquant"):
        return lever_of(key, levers)
    if key == ROUTER_KEY and isinstance(value, str):
        try:
            fields = json.loads(value)
        except json.JSONDecodeError:
            return None  # SGLang refuses it in its own words
        router = fields.get("router_dtype") if isinstance(fields, Mapping) else None
        if router not in (None, "fp32"):
            return lever_of(key, levers)
    return None


def _graph_problem(key: str, value: Any) -> str | None:
    if key in GRAPH_OFF_FLAGS and value not in (None, False, "false", "False"):
        return (
            f"contradicts {GRAPHS}; SGLang 0.5.23 would also let ling-chat's "
            "cuda_graph_backend_decode=full outrank it, so it would silently do nothing"
        )
    if key == "cuda_graph_backend_decode" and value == "disabled":
        return f"contradicts {GRAPHS}"
    if key == "cuda_graph_config" and isinstance(value, Mapping):
        decode = value.get("decode")
        if isinstance(decode, Mapping) and decode.get("backend") == "disabled":
            return f"(decode backend disabled) contradicts {GRAPHS}"
    return None


def _env_problem(levers: Levers, profile: str, env: Mapping[str, str]) -> str | None:
    extend = env.get("SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH", "")
    if levers.nextn and extend.strip().lower() in TRUE:
        return (
            f"SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH={extend} contradicts {GRAPHS} of profile "
            f"{profile}: NEXTN's draft-extend graph is needed; unset it"
        )
    ignored = env.get("SGLANG_FP8_IGNORED_LAYERS", "")
    if ignored:
        return (
            f"SGLANG_FP8_IGNORED_LAYERS={ignored} contradicts the checkpoint's quantization "
            "that the levers run on (SGLang would leave those layers unquantized); unset it"
        )
    return None
