"""What the engine is asked to run: a profile's levers and every profile's settings (pure).

Each lever states its own server arguments (app/levers); the proof checks the running model
against the levers, never against these arguments. The other settings (server arguments,
environment, chat template, reasoning parser) are tables of name, value and reason; the
table of docs/engine-settings.md is rendered from them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.errors import ConfigError
from app.levers.checks.accept_length import DEFAULT_MIN as DEFAULT_MIN_ACCEPT_LENGTH
from app.levers.draft import dspark
from app.levers.lever import Context, Profile
from app.levers.profiles import DEFAULT_MEM_FRACTION, DEFAULT_PROFILE, PROFILES
from app.levers.refusals import lever_args


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What the local GPU and installed kernels allow (read by the engine at start)."""

    sm: int
    """Compute capability as major*10+minor: 90 for H100/H200, 121 for the DGX Spark's GB10."""
    has_fa3: bool
    has_flashinfer: bool
    has_xgrammar: bool

    @property
    def sm12x(self) -> bool:
        """An sm_12x GPU: the DGX Spark's GB10 (sm_121), or an RTX Blackwell (sm_120)."""
        return self.sm // 10 == 12


RECIPE = "the official Spark recipe"
"""inclusionAI's ling-cookbook DGX Spark notebook, the recipe NVIDIA measured its levers with."""


def _fp8_gemm(gpu: GpuFacts) -> str | None:
    return "cutlass" if gpu.sm12x else None


def _attention(gpu: GpuFacts) -> str:
    if gpu.sm12x:
        return "flashinfer" if gpu.has_flashinfer else "triton"
    return "fa3" if gpu.sm == 90 and gpu.has_fa3 else "triton"


LOAD_FORMAT_SM90: str | None = "instanttensor"
"""The H200's weight load format (None: SGLang's `auto`): the fastest cold load that passed the
proof in lab/scripts/gpu_load_bench.py (docs/load.md)."""
LOAD_FORMAT_SM12X: str | None = None
"""The DGX Spark's: SGLang's `auto` until the benchmark runs on a GB10 (docs/load.md)."""
LOAD_FORMAT_WHY = (
    "sm_90: `instanttensor`, the fastest cold load that passed the proof (12 layers, 20.2 GB: "
    "17.3 s median against `auto`'s 25.4 s, two runs each, and fastsafetensors' 20.9 s); "
    "sm_12x: SGLang's `auto` (8 reader threads through the page cache) until measured on a "
    "GB10 (docs/load.md)"
)
LOAD_FORMAT_PACKAGES = {"instanttensor": "instanttensor", "fastsafetensors": "fastsafetensors"}
"""Load format -> the module it reads with (the `engine` extra holds the default's)."""


def _load_format(gpu: GpuFacts) -> str | None:
    return LOAD_FORMAT_SM12X if gpu.sm12x else LOAD_FORMAT_SM90


def _loader_extra(gpu: GpuFacts) -> str | None:
    # fastsafetensors asks for GPUDirect Storage unless told not to; neither machine has it.
    return '{"enable_gds": false}' if _load_format(gpu) == "fastsafetensors" else None


@dataclass(frozen=True, slots=True)
class Setting:
    """One engine setting, the value ling-chat gives it and why (docs/engine-settings.md's rows)."""

    name: str
    value: Any
    """The value, or a function of the GPU; None: not passed (SGLang's or the checkpoint's)."""
    why: str

    def on(self, gpu: GpuFacts) -> Any:
        """The value on this GPU."""
        return self.value(gpu) if callable(self.value) else self.value


SERVER_ARGS: tuple[Setting, ...] = (
    Setting("dtype", "bfloat16", "the checkpoint's unquantized parts are BF16"),
    Setting(
        "mem_fraction_static",
        DEFAULT_MEM_FRACTION,
        "the `mem_fraction` setting; 0.65 as in the recipe's scripts (its notebook: 0.68); "
        "0.75 wedged a Spark under load",
    ),
    Setting("max_running_requests", 1, f"{RECIPE}: one person, one request at a time"),
    Setting("cuda_graph_backend_decode", "full", f"{RECIPE} (SGLang's default)"),
    Setting(
        "cuda_graph_bs_decode",
        [1],
        f"{RECIPE}: decode graphs for batch 1 only; on the H200 (6 layers) the stack's captures "
        "took 3.7 s and 0.25 GB against 21.4 s and 1.15 GB for SGLang's list (batch 1-12)",
    ),
    Setting("cuda_graph_max_bs_decode", 1, RECIPE),
    Setting(
        "cuda_graph_backend_prefill",
        "disabled",
        f"{RECIPE} (SGLang 0.5.23 turns them off for KDA models too)",
    ),
    Setting("page_size", 64, RECIPE),
    Setting(
        "max_mamba_cache_size",
        64,
        f"{RECIPE}: caps the KDA state pool: 5.2 GB at 42 layers on the H200, "
        "11.2 GB at SGLang's default",
    ),
    Setting("chunked_prefill_size", 8192, RECIPE),
    Setting("max_prefill_tokens", 16384, f"{RECIPE} (SGLang's default)"),
    Setting("disable_flashinfer_autotune", True, f"{RECIPE}: no autotuning pass at start"),
    Setting(
        "disable_shared_experts_fusion",
        True,
        f"{RECIPE}; SGLang keeps them apart anyway beside MXFP4 routed experts",
    ),
    Setting(
        "fp8_gemm_runner_backend",
        _fp8_gemm,
        f"sm_12x: {RECIPE} (`--fp8-gemm-backend`; `auto` resolves to it there too); "
        "elsewhere `auto`: SGLang 0.5.23 refuses `cutlass` off sm_12x",
    ),
    Setting(
        "attention_backend",
        _attention,
        f"sm_12x: {RECIPE}, kept on evidence: SGLang pins the host to each verify on it, yet "
        "on the H200 its round was 8.69 ms against Triton's 9.71 ms unpinned (42 layers; its "
        "MLA kernels 3.3 ms less GPU time; docs/performance.md); sm_90: FA3, SGLang's MLA "
        "default on Hopper (FA3 is Hopper-only). Triton without that kernel: MLA, the draft's "
        "multi-step backend and CUDA graphs (torch_native/flex would disable them)",
    ),
    Setting(
        "sampling_backend",
        lambda gpu: "flashinfer" if gpu.has_flashinfer else "pytorch",
        "SGLang's default when FlashInfer is installed; PyTorch sampling otherwise",
    ),
    Setting(
        "grammar_backend",
        lambda gpu: "xgrammar" if gpu.has_xgrammar else "none",
        "chat needs no constrained decoding; without xgrammar SGLang must be told so",
    ),
    Setting(
        "context_length",
        None,
        f"{RECIPE}: the checkpoint's native 262,144, no YaRN override "
        "(the `context_length` setting lowers it)",
    ),
    Setting(
        "startup_weight_load_mode",
        "serial",
        "overlap mode captures graphs before the real weights (and the FP8 head) are in place",
    ),
    Setting(
        "sleep_on_idle",
        True,
        "between requests the scheduler sleeps on its sockets instead of polling, "
        "one CPU core at 100%",
    ),
    Setting("load_format", _load_format, LOAD_FORMAT_WHY),
    Setting(
        "model_loader_extra_config",
        _loader_extra,
        "with fastsafetensors: no GPUDirect Storage (neither the Spark nor the H200 has it)",
    ),
    Setting("log_level", "warning", "SGLang's log file: INFO while starting, then warnings up"),
)
"""Server arguments of every profile; each profile's levers add theirs (server_args)."""

ENVIRONMENT: tuple[Setting, ...] = (
    Setting(
        "SGLANG_ENABLE_JIT_DEEPGEMM",
        "0",
        f"{RECIPE}; on sm_90 DeepGEMM would JIT-compile at first start, and no H200 run "
        "so far had it",
    ),
    Setting("SGLANG_JIT_DEEPGEMM_PRECOMPILE", "0", RECIPE),
    Setting(
        "HUMMING_COMPILER",
        "nvrtc",
        f"{RECIPE}; Humming would fall back to nvcc silently without NVRTC",
    ),
    Setting("HUMMING_CACHE_DIR", "~/.humming/cache", f"{RECIPE} (Humming's default)"),
    Setting(
        "SGLANG_FP8_IGNORED_LAYERS",
        None,
        f"{RECIPE} sets it empty, which in SGLang 0.5.23 is unset; any other value is "
        "refused before the start, and by the proof",
    ),
)
"""Variables for SGLang and its processes; one the user has set keeps its value."""

CHAT_TEMPLATE: tuple[Setting, ...] = (
    Setting(
        "enable_thinking",
        True,
        f"{RECIPE}; thinking off cost 17 (math) to 31 (reasoning) points in a second Spark "
        "recipe, and was not faster; a chat whose thinking is off (F3) asks for `False`",
    ),
)
"""Keyword arguments of the model's chat template (`ling-chat serve`: its defaults)."""

REASONING_PARSER = Setting(
    "reasoning_parser",
    "ling3",
    "`ling-chat serve`: SGLang 0.5.23's Ling3 rules give its clients the thinking apart; "
    "ling-chat's own chat splits the raw text at `</think>` itself, in-process and from a "
    "server (Ling3's parser hands a thinking cut short out again as the answer)",
)
"""The parser that splits thinking from the answer for `ling-chat serve`'s clients."""


def engine_environment() -> dict[str, str]:
    """The variables of ENVIRONMENT that are set, with `~` expanded."""
    return {s.name: os.path.expanduser(s.value) for s in ENVIRONMENT if s.value is not None}


def chat_template_kwargs() -> dict[str, Any]:
    """The chat template's keyword arguments."""
    return {s.name: s.value for s in CHAT_TEMPLATE}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the in-process engine needs; built by the CLI from Settings."""

    model_path: str
    profile: str = DEFAULT_PROFILE
    mem_fraction: float = DEFAULT_MEM_FRACTION
    log_dir: Path | None = None
    min_accept_length: float = DEFAULT_MIN_ACCEPT_LENGTH
    context_length: int | None = None
    dspark_draft: str = dspark.DRAFT
    """The `dspark` profile's draft model: a Hugging Face id or a local folder."""
    overrides: dict[str, Any] = field(default_factory=dict)
    """Extra SGLang server arguments (tests: load_format="dummy"; serve: host, port, tp).

    A None value removes ling-chat's setting, so that SGLang's own default applies."""

    def __post_init__(self) -> None:
        args = {**lever_args(self.levers, self.context), **self.overrides}
        for lever in self.levers.levers:
            if lever.validate is not None and (problem := lever.validate(args)):
                raise ConfigError(problem)

    @property
    def levers(self) -> Profile:
        """The profile's levers; unknown profiles are a programming error."""
        return PROFILES[self.profile]

    @property
    def context(self) -> Context:
        """What the levers' server arguments depend on."""
        return Context(self.model_path, self.dspark_draft, self.levers.window)

    @property
    def draft_model(self) -> str | None:
        """The draft model this profile loads beside the checkpoint (DSpark's; an override of
        `speculative_draft_model_path` wins), or None."""
        if not self.levers.has(dspark.LEVER):
            return None
        return self.overrides.get("speculative_draft_model_path", self.dspark_draft)


def draft_models(configs: Iterable[EngineConfig]) -> list[str]:
    """The draft models these engines load beside their checkpoints, each once, in order."""
    return list(dict.fromkeys(c.draft_model for c in configs if c.draft_model is not None))


def server_args(config: EngineConfig, gpu: GpuFacts) -> dict[str, Any]:
    """SGLang `ServerArgs` keyword arguments for a profile at batch size 1."""
    args: dict[str, Any] = {s.name: s.on(gpu) for s in SERVER_ARGS}
    args.update(
        model_path=config.model_path,
        mem_fraction_static=config.mem_fraction,
        context_length=config.context_length,
    )
    args.update(lever_args(config.levers, config.context))
    args.update(config.overrides)
    return {name: value for name, value in args.items() if value is not None}
