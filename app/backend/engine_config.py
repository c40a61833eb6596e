"""What the engine is asked to run: profile levers and SGLang server arguments (pure).

The levers a profile turns on are stated here once; the proof (app/backend/proof.py)
later checks the running model against them, never against these arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NEXTN_STEPS = 3
NEXTN_TOPK = 1
NEXTN_DRAFT_TOKENS = 4


@dataclass(frozen=True, slots=True)
class Levers:
    """The three optimizations (plus the FP32-logits head of the official recipe)."""

    humming: bool
    fp8_head: bool
    nextn: bool
    fp32_logits: bool = False


PROFILES: dict[str, Levers] = {
    "stack": Levers(humming=True, fp8_head=True, nextn=True),
    "baseline": Levers(humming=False, fp8_head=False, nextn=False, fp32_logits=True),
    "humming": Levers(humming=True, fp8_head=False, nextn=False, fp32_logits=True),
    "humming+fp8": Levers(humming=True, fp8_head=True, nextn=False),
    "humming+nextn": Levers(humming=True, fp8_head=False, nextn=True),
}


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """What the local GPU and installed kernels allow (read by the engine at start)."""

    sm: int
    """Compute capability as major*10+minor: 90 for H100/H200, 121 for the DGX Spark's GB10."""
    has_fa3: bool
    has_flashinfer: bool
    has_xgrammar: bool


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the in-process engine needs; built by the CLI from Settings."""

    model_path: str
    profile: str = "stack"
    mem_fraction: float = 0.65
    log_dir: Path | None = None
    min_accept_length: float = 1.5
    context_length: int | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    """Extra SGLang server arguments (tests: load_format="dummy"; serve: host, port, tp)."""

    @property
    def levers(self) -> Levers:
        """The levers of this profile; unknown profiles are a programming error."""
        return PROFILES[self.profile]


def server_args(config: EngineConfig, gpu: GpuFacts) -> dict[str, Any]:
    """SGLang `ServerArgs` keyword arguments for a profile at batch size 1."""
    levers = config.levers
    args: dict[str, Any] = {
        "model_path": config.model_path,
        "dtype": "bfloat16",
        "mem_fraction_static": config.mem_fraction,
        # Batch size 1: one request at a time, graphs captured for exactly that.
        "max_running_requests": 1,
        "cuda_graph_bs_decode": [1],
        # `auto` silently resolves to flashinfer_mxfp4 for this model; never leave it.
        "moe_runner_backend": "humming" if levers.humming else "flashinfer_mxfp4",
        # The FP8 head replaces the BF16 matmul that FP32 logits would upcast: exclusive.
        "enable_fp32_lm_head": levers.fp32_logits and not levers.fp8_head,
        # Serial loading: overlap mode captures graphs before real weights (and our
        # FP8 head) are in place.
        "startup_weight_load_mode": "serial",
        # A chat idles most of the time: without this the scheduler polls its sockets in a
        # busy loop between requests, one CPU core at 100%; with it, it sleeps on them and
        # wakes when a request arrives (scheduler_components/idle_sleeper.py).
        "sleep_on_idle": True,
        "log_level": "warning",
        **_kernel_backends(gpu),
    }
    if config.context_length is not None:
        args["context_length"] = config.context_length
    if levers.nextn:
        args.update(
            speculative_algorithm="NEXTN",
            speculative_draft_model_path=config.model_path,
            speculative_num_steps=NEXTN_STEPS,
            speculative_eagle_topk=NEXTN_TOPK,
            speculative_num_draft_tokens=NEXTN_DRAFT_TOKENS,
        )
    args.update(config.overrides)
    return args


def _kernel_backends(gpu: GpuFacts) -> dict[str, str]:
    """Attention, sampling and grammar backends for this GPU, each with its reason."""
    return {
        # FA3 is Hopper-only (sm_90) and needs sgl_kernel's flash_ops; the Spark's GB10
        # (sm_121) and a Hopper without flash_ops use Triton, which supports MLA, the
        # draft's multi-step backend and CUDA graphs (torch_native/flex would disable them).
        "attention_backend": "fa3" if gpu.sm == 90 and gpu.has_fa3 else "triton",
        # FlashInfer's sampling kernels when present; PyTorch sampling otherwise.
        "sampling_backend": "flashinfer" if gpu.has_flashinfer else "pytorch",
        # Chat needs no constrained decoding; without xgrammar SGLang must be told so.
        "grammar_backend": "xgrammar" if gpu.has_xgrammar else "none",
    }
