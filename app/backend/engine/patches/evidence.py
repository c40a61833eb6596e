"""Evidence of what the running model is, read from its live modules in the scheduler.

`Scheduler.get_init_info` is sent to the app after every CUDA graph is captured; it
gains a `ling_chat_proof` dict: every lever's facts (each lever's module under app/levers
names its readers), the versions, the lever settings SGLang resolved and the log level in
force. Counters wrapped around the Humming runner and Humming's kernel preparation record
which of them ran while a graph was being captured, the only time Python sees a replayed
kernel. Once the target (and draft) model is found, no fact raises: one that cannot be read
is reported with its error, and the proof fails on it.

`collect` reads the scheduler's objects and, through `Sources`, the live state of SGLang,
Humming and the FP8 head; `LiveSources` is that state in the scheduler process.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from app.backend.engine.patches.host import log_level
from app.backend.proof import PROOF_KEY
from app.levers.live import HummingState, Live, Sources
from app.levers.profiles import LEVERS

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


def collect(scheduler: Any, sources: Sources) -> dict[str, Any]:
    """Every fact the proof reads, as JSON-ready values: the versions, the settings SGLang
    resolved, and each lever's facts."""
    live = Live.of(scheduler, sources)
    readers: dict[str, Callable[[Live], Any]] = {
        "versions": lambda live: sources.versions(),
        "ran_with": lambda live: _ran_with(scheduler.server_args),
        "log_level": lambda live: log_level.collect(scheduler.server_args),
    }
    for lever in LEVERS:
        readers.update(lever.facts)
    facts: dict[str, Any] = {}
    for key, read in readers.items():
        try:
            facts[key] = read(live)
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

    def patch(self, name: str) -> Any:
        return importlib.import_module(f"app.backend.engine.patches.{name}")


def _ran_with(server_args: Any) -> dict[str, Any]:
    """The lever settings SGLang resolved (after every override and outrank), JSON-ready."""
    resolved = server_args.resolved_dict()
    return {key: json.loads(json.dumps(resolved.get(key), default=str)) for key in RAN_WITH}
