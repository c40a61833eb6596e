"""Evidence of what the running model is, read from its live modules in the scheduler.

`Scheduler.get_init_info` is sent to the app after every CUDA graph is captured; it
gains a `ling_chat_proof` dict. Counters wrapped around the Humming runner, Humming's
kernel preparation and the FP8 head record which of them ran while a graph was being
captured, the only time Python sees a replayed kernel. Once the target (and draft)
model is found, no fact raises: one that cannot be read is reported with its error, and
the proof fails on it.
"""

from __future__ import annotations

import os
import traceback
from collections import Counter
from typing import Any

import torch

from app.backend.patches import dspark

FAKING_ENV = (
    "SGLANG_SIMULATE_ACC_LEN",
    "SGLANG_KILLPG_ON_SCHEDULER_EXCEPTION",
    "SGLANG_FP8_IGNORED_LAYERS",
)
"""Variables that fake accept lengths or silently change quantization or process handling."""

CAPTURE: Counter[str] = Counter()
"""Calls seen while a CUDA graph was being captured, by what was called."""
HUMMING_KERNELS_CAPTURED: set[int] = set()


def _counting(name: str, fn: Any) -> Any:
    """Wrap `fn` so that calls made during graph capture are counted under `name`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if torch.cuda.is_current_stream_capturing():
            CAPTURE[name] += 1
        return fn(*args, **kwargs)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def install() -> None:
    """Install the capture counters and the init-info hook."""
    from humming.kernel.humming import HummingKernel
    from sglang.srt.layers.moe.moe_runner.humming import HummingRunnerCore
    from sglang.srt.managers.scheduler import Scheduler

    HummingRunnerCore.run = _counting("humming_runner", HummingRunnerCore.run)
    stock_prepare = HummingKernel.prepare_kernels.__func__

    def prepare_kernels(cls: Any, *args: Any, **kwargs: Any) -> Any:
        configs = stock_prepare(cls, *args, **kwargs)
        if torch.cuda.is_current_stream_capturing():
            HUMMING_KERNELS_CAPTURED.update(int(k) for k in configs[2::4].tolist())
        return configs

    HummingKernel.prepare_kernels = classmethod(prepare_kernels)
    stock_info = Scheduler.get_init_info

    def get_init_info(self: Any) -> dict[str, Any]:
        info = stock_info(self)
        info["ling_chat_proof"] = collect(self)
        return info

    Scheduler.get_init_info = get_init_info


def collect(scheduler: Any) -> dict[str, Any]:
    """Every fact the proof rules read, as JSON-ready values."""
    facts: dict[str, Any] = {}
    target = scheduler.tp_worker.model_runner.model
    spec = scheduler.draft_worker
    draft_worker = getattr(spec, "draft_worker", None)
    dspark_spec = dspark.is_dspark(spec)  # its draft is dense and judged by its own fact
    draft = draft_worker.draft_runner.model if draft_worker and not dspark_spec else None
    parts = {
        "versions": lambda: _versions(),
        "moe_target": lambda: _moe_layers(target),
        "moe_draft": lambda: _moe_layers(draft) if draft is not None else None,
        "humming": lambda: _humming(),
        "head_target": lambda: _head(target),
        "head_draft": lambda: _head(draft) if draft is not None else None,
        "fp8_head": lambda: _fp8_head(),
        "sharing": lambda: _sharing(target, draft) if draft is not None else None,
        "speculative": lambda: _speculative(spec, draft_worker),
        "cuda_graphs": lambda: _graphs(scheduler),
        "env": lambda: {name: os.environ.get(name) for name in FAKING_ENV},
        "capture_calls": lambda: dict(CAPTURE),
        "dspark": lambda: dspark.collect(scheduler) if dspark_spec else None,
    }
    for key, read in parts.items():
        try:
            facts[key] = read()
        except Exception as exc:  # reported as a fact; the proof fails on it
            facts[key] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    return facts


def _versions() -> dict[str, Any]:
    import sglang

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "sglang": sglang.__version__,
        "torch": torch.__version__,
        "gpu": props.name,
        "sm": props.major * 10 + props.minor,
    }


def _moe_layers(model: Any) -> list[dict[str, Any]]:
    """One entry per FusedMoE layer: its quant method, runner and Humming dtypes."""
    from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE

    layers = []
    for name, module in model.named_modules():
        if not isinstance(module, FusedMoE):
            continue
        runner = getattr(module, "runner", None)
        core = getattr(runner, "runner_core", None)
        metas = getattr(module, "humming_metas", None) or {}
        w13 = metas.get("w13")
        layers.append(
            {
                "name": name,
                "quant_method": type(module.quant_method).__name__,
                "runner_backend": str(getattr(module, "runner_backend", None)),
                "runner_core": type(core).__name__ if core is not None else None,
                "mxfp4_backend": getattr(module, "_dsv4_mxfp4_backend", None),
                "weight_dtype": str(getattr(w13, "b_dtype", None)) if w13 else None,
                "activation_dtype": str(getattr(w13, "a_dtype", None)) if w13 else None,
            }
        )
    return layers


def _humming() -> dict[str, Any]:
    """Runner cores alive, kernels compiled here, and the ones used during capture."""
    from humming.jit.runtime import KernelRuntime
    from humming.kernel.humming import HummingKernel
    from sglang.srt.layers.moe.moe_runner.humming import HummingRunnerCore

    kernels = {
        k.kernel_id: k.kernel_filename
        for k in KernelRuntime._instances.values()
        if isinstance(k, HummingKernel) and getattr(k, "inited", False)
    }
    captured = sorted(HUMMING_KERNELS_CAPTURED)
    cache_dir = os.environ.get("HUMMING_CACHE_DIR") or os.path.expanduser("~/.humming/cache")
    captured_files = [f for f in (kernels.get(k) for k in captured) if f]
    return {
        "runner_cores": len(HummingRunnerCore.runner_cores),
        "kernels_compiled": len(kernels),
        "kernels_captured": len(captured),
        "captured_cubins_in_cache": sum(
            bool(f)
            and os.path.realpath(f).startswith(os.path.realpath(cache_dir))
            and os.path.isfile(f)
            for f in captured_files
        ),
        "cache_dir": cache_dir,
        "compiler": KernelRuntime._get_compiler().__name__,
    }


def _head(model: Any) -> dict[str, Any]:
    head = model.lm_head
    weight = getattr(head, "weight", None)
    processor = getattr(model, "logits_processor", None)
    return {
        "module": type(head).__name__,
        "quant_method": type(getattr(head, "quant_method", None)).__name__,
        "weight_dtype": str(weight.dtype).removeprefix("torch.") if weight is not None else None,
        "weight_shape": list(weight.shape) if weight is not None else None,
        "fp32_logits": bool(getattr(processor, "use_fp32_lm_head", False)),
        "config_fp32_logits": bool(getattr(model.config, "enable_lm_head_fp32", False)),
    }


def _fp8_head() -> dict[str, Any]:
    from app.backend.patches import fp8_head

    facts = dict(fp8_head.FACTS)
    if facts.get("installed"):
        cls: Any = fp8_head.method_class()
        facts.update(
            captured_calls=cls.captured_calls,
            captured_by_kernel=dict(cls.captured_by_kernel),
            eager_calls=cls.eager_calls,
        )
    return facts


def _sharing(target: Any, draft: Any) -> dict[str, Any]:
    return {
        "head_module_shared": draft.lm_head is target.lm_head,
        "head_weight_shared": getattr(draft.lm_head, "weight", None) is target.lm_head.weight,
        "embed_shared": draft.model.word_embeddings.weight is target.model.word_embeddings.weight,
    }


def _speculative(spec: Any, draft_worker: Any) -> dict[str, Any] | None:
    if spec is None:
        return None
    return {
        "worker": type(spec).__name__,
        "draft_worker": type(draft_worker).__name__ if draft_worker is not None else None,
        "num_steps": getattr(draft_worker, "speculative_num_steps", None),
        "topk": getattr(draft_worker, "topk", None),
        "num_draft_tokens": getattr(draft_worker, "speculative_num_draft_tokens", None),
    }


def _graphs(scheduler: Any) -> dict[str, Any]:
    """Captured CUDA-graph memory by phase: a phase is present only if it was captured."""
    phases = dict(scheduler.tp_worker.graph_memory_usage)
    spec = scheduler.draft_worker
    if spec is not None:
        phases.update(spec.graph_memory_usage)
    return {"phases": sorted(phases), "memory_gb": {k: round(v, 4) for k, v in phases.items()}}
