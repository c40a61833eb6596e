"""Evidence of what the running model is, read from its live modules in the scheduler.

`Scheduler.get_init_info` is sent to the app after every CUDA graph is captured; it
gains a `ling_chat_proof` dict. Counters wrapped around the Humming runner, Humming's
kernel preparation and the FP8 head record which of them ran while a graph was being
captured, the only time Python sees a replayed kernel. Once the target (and draft)
model is found, no fact raises: one that cannot be read is reported with its error, and
the proof fails on it.

`collect` reads the scheduler's objects and, through `Sources`, the live state of
SGLang, Humming and the FP8 head; `LiveSources` is that state in the scheduler process.
"""

from __future__ import annotations

import json
import os
import traceback
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from app.backend.engine.patches import dspark, graph_runners, replayssm
from app.backend.engine.patches.host import commit, log_level
from app.backend.proof import PROOF_KEY

FAKING_ENV = (
    "SGLANG_SIMULATE_ACC_LEN",
    "SGLANG_KILLPG_ON_SCHEDULER_EXCEPTION",
    "SGLANG_FP8_IGNORED_LAYERS",
)
"""Variables that fake accept lengths or silently change quantization or process handling."""

RAN_WITH = (
    "moe_runner_backend",
    "quantization",
    "enable_fp32_lm_head",
    "json_model_override_args",
    "speculative_algorithm",
    "speculative_draft_model_quantization",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "enable_linear_replayssm_spec",
    "linear_replayssm_cache_len",
    "attention_backend",
    "disable_cuda_graph",
    "cuda_graph_config",
)
"""The server arguments, as SGLang resolved them, that the levers depend on."""

CAPTURE: Counter[str] = Counter()
"""Calls seen while a CUDA graph was being captured, by what was called."""
HUMMING_KERNELS_CAPTURED: set[int] = set()


def _counting(name: str, fn: Any) -> Any:
    """Wrap `fn` so that calls made during graph capture are counted under `name`."""
    import torch

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if torch.cuda.is_current_stream_capturing():
            CAPTURE[name] += 1
        return fn(*args, **kwargs)

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    return wrapper


def install() -> None:
    """Install the capture counters and the init-info hook."""
    import torch
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
        info[PROOF_KEY] = collect(self, LiveSources())
        return info

    Scheduler.get_init_info = get_init_info


@dataclass(frozen=True, slots=True)
class HummingState:
    """Humming's kernels in this process, and the ones prepared during graph capture."""

    runner_cores: int
    kernel_files: Mapping[int, str]
    """Every compiled kernel alive, by id: its cubin file."""
    captured: frozenset[int]
    compiler: str
    cache_dir: str


class Sources(Protocol):
    """What `collect` reads besides the scheduler's objects."""

    def versions(self) -> dict[str, Any]: ...

    def moe_class(self) -> type[Any]:
        """SGLang's FusedMoE layer class."""

    def humming(self) -> HummingState: ...

    def capture_calls(self) -> Mapping[str, int]:
        """Calls seen while a CUDA graph was being captured, by what was called."""

    def fp8_head_facts(self) -> Mapping[str, Any]:
        """What quantizing the head found (`installed` False when it was not)."""

    def fp8_head_method(self) -> Any:
        """The installed head method's class, with its call counters."""

    def verify_commit(self) -> Any:
        """The function SGLang's NEXTN verify commits the KDA state through."""

    def host_facts(self) -> Mapping[str, Mapping[str, Any]]:
        """The host levers' own records: `gc` and `cores` (patches/host)."""


def collect(scheduler: Any, sources: Sources) -> dict[str, Any]:
    """Every fact the proof rules read, as JSON-ready values."""
    facts: dict[str, Any] = {}
    target = scheduler.tp_worker.model_runner.model
    spec = scheduler.draft_worker
    draft_worker = getattr(spec, "draft_worker", None)
    dspark_spec = dspark.is_dspark(spec)  # its draft is dense and judged by its own fact
    draft = draft_worker.draft_runner.model if draft_worker and not dspark_spec else None
    parts = {
        "versions": sources.versions,
        "moe_target": lambda: _moe_layers(target, sources.moe_class()),
        "moe_draft": lambda: _moe_layers(draft, sources.moe_class()) if draft is not None else None,
        "humming": lambda: _humming(sources.humming()),
        "router": lambda: _router(target, draft),
        "head_target": lambda: _head(target),
        "head_draft": lambda: _head(draft) if draft is not None else None,
        "fp8_head": lambda: _fp8_head(sources),
        "sharing": lambda: _sharing(target, draft) if draft is not None else None,
        "speculative": lambda: _speculative(spec, draft_worker),
        "cuda_graphs": lambda: _graphs(scheduler),
        "env": lambda: {name: os.environ.get(name) for name in FAKING_ENV},
        "ran_with": lambda: _ran_with(scheduler.server_args),
        "capture_calls": lambda: dict(sources.capture_calls()),
        "dspark": lambda: dspark.collect(scheduler) if dspark_spec else None,
        "dspark_weights": lambda: (
            dspark.draft_weights(scheduler.draft_worker.draft_model) if dspark_spec else None
        ),
        "replayssm": lambda: replayssm.collect(scheduler),
        "prepared_commit": lambda: commit.collect(sources.verify_commit()),
        "gc": lambda: dict(sources.host_facts()["gc"]),
        "cores": lambda: dict(sources.host_facts()["cores"]),
        "log_level": lambda: log_level.collect(scheduler.server_args),
    }
    for key, read in parts.items():
        try:
            facts[key] = read()
        except Exception as exc:  # reported as a fact; the proof fails on it
            facts[key] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
    return facts


class LiveSources:
    """The sources in SGLang's scheduler process, with ling-chat's patches installed."""

    def versions(self) -> dict[str, Any]:
        import sglang
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return {
            "sglang": sglang.__version__,
            "torch": torch.__version__,
            "gpu": props.name,
            "sm": props.major * 10 + props.minor,
        }

    def moe_class(self) -> type[Any]:
        from sglang.srt.layers.moe.fused_moe_triton.layer import FusedMoE

        return FusedMoE

    def humming(self) -> HummingState:
        from humming.jit.runtime import KernelRuntime
        from humming.kernel.humming import HummingKernel
        from sglang.srt.layers.moe.moe_runner.humming import HummingRunnerCore

        return HummingState(
            runner_cores=len(HummingRunnerCore.runner_cores),
            kernel_files={
                k.kernel_id: k.kernel_filename
                for k in KernelRuntime._instances.values()
                if isinstance(k, HummingKernel) and getattr(k, "inited", False)
            },
            captured=frozenset(HUMMING_KERNELS_CAPTURED),
            compiler=KernelRuntime._get_compiler().__name__,
            cache_dir=os.environ.get("HUMMING_CACHE_DIR") or os.path.expanduser("~/.humming/cache"),
        )

    def capture_calls(self) -> Mapping[str, int]:
        return CAPTURE

    def fp8_head_facts(self) -> Mapping[str, Any]:
        from app.backend.engine.patches import fp8_head

        return fp8_head.FACTS

    def fp8_head_method(self) -> Any:
        from app.backend.engine.patches import fp8_head

        return fp8_head.method_class()

    def verify_commit(self) -> Any:
        return commit.live_commit()

    def host_facts(self) -> Mapping[str, Mapping[str, Any]]:
        from app.backend.engine.patches.host import cores, gc_freeze

        return {"gc": gc_freeze.collect(), "cores": cores.collect()}


def _moe_layers(model: Any, moe_class: type[Any]) -> list[dict[str, Any]]:
    """One entry per FusedMoE layer: its quant method, runner and Humming dtypes."""
    layers = []
    for name, module in model.named_modules():
        if not isinstance(module, moe_class):
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


def _humming(state: HummingState) -> dict[str, Any]:
    """Runner cores alive, kernels compiled here, and the ones used during capture."""
    captured = sorted(state.captured)
    cache = os.path.realpath(state.cache_dir)
    captured_files = [f for f in (state.kernel_files.get(k) for k in captured) if f]
    return {
        "runner_cores": state.runner_cores,
        "kernels_compiled": len(state.kernel_files),
        "kernels_captured": len(captured),
        "captured_cubins_in_cache": sum(
            os.path.realpath(f).startswith(cache) and os.path.isfile(f) for f in captured_files
        ),
        "cache_dir": state.cache_dir,
        "compiler": state.compiler,
    }


ROUTER_GATE_CLASS = "BailingMoEGate"
"""SGLang 0.5.23's MoE router gate of BailingMoeV3 and of its NEXTN layer."""


def _router(target: Any, draft: Any) -> dict[str, Any]:
    """The router gates' weight dtypes and bytes (target, NEXTN draft), and the config's
    `router_dtype` as SGLang read it (after `json_model_override_args`)."""
    return {
        "config_router_dtype": getattr(target.config, "router_dtype", None),
        "target": _gates(target),
        "draft": _gates(draft) if draft is not None else None,
    }


def _gates(model: Any) -> dict[str, Any]:
    """Every router gate of `model`: how many in each weight dtype, and their bytes."""
    dtypes: Counter[str] = Counter()
    nbytes = 0
    for _name, module in model.named_modules():
        if type(module).__name__ == ROUTER_GATE_CLASS:
            dtypes[str(module.weight.dtype).removeprefix("torch.")] += 1
            nbytes += module.weight.numel() * module.weight.element_size()
    return {"dtypes": dict(dtypes), "bytes": nbytes}


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


def _fp8_head(sources: Sources) -> dict[str, Any]:
    facts = dict(sources.fp8_head_facts())
    if facts.get("installed"):
        cls = sources.fp8_head_method()
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


def _ran_with(server_args: Any) -> dict[str, Any]:
    """The lever settings SGLang resolved (after every override and outrank), JSON-ready."""
    resolved = server_args.resolved_dict()
    return {key: json.loads(json.dumps(resolved.get(key), default=str)) for key in RAN_WITH}


def _graphs(scheduler: Any) -> dict[str, Any]:
    """Each phase's CUDA graphs as its runner holds them, and SGLang's memory figures
    (which list every phase, captured or not)."""
    spec = scheduler.draft_worker
    phases = graph_runners.target_phases(scheduler.tp_worker.model_runner, spec is not None)
    draft = getattr(spec, "draft_worker", None)
    extend_backend = None
    if draft is not None and not dspark.is_dspark(spec):  # DSpark's are in its own fact
        extend = getattr(draft, "cuda_graph_runner_for_draft_extend", None)
        phases["draft_decode"] = graph_runners.graph_runner(
            getattr(draft, "cuda_graph_runner", None)
        )
        phases["draft_extend"] = graph_runners.graph_runner(extend)
        backend = getattr(draft, "draft_extend_attn_backend", None)
        extend_backend = type(backend).__name__ if backend is not None else None
    memory = dict(scheduler.tp_worker.graph_memory_usage)
    if spec is not None:
        memory.update(spec.graph_memory_usage)
    return {
        "phases": phases,
        "draft_extend_backend": extend_backend,
        "memory_gb": {k: round(v, 4) for k, v in memory.items()},
    }
