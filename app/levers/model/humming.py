"""Humming: the MXFP4 experts run Humming's kernels (`moe_runner_backend="humming"`).

Off, a profile runs the official recipe's FlashInfer MXFP4 MoE, and the line checks that
no MoE layer runs Humming. Its facts: every FusedMoE layer's method and runner (target and
NEXTN draft), the runner's calls during graph capture, and Humming's kernels with their
cubins in the cache.
"""

from __future__ import annotations

import os
from typing import Any

from app.core.proof_report import ProofLine
from app.levers.backends import FLASHINFER
from app.levers.lever import (
    ByteTerm,
    Context,
    Facts,
    Lever,
    Line,
    Package,
    Profile,
    RunsOn,
    fits_any,
    no_env_refusal,
)
from app.levers.lines import error, judged, off
from app.levers.live import HummingState, Live

METHOD = "Mxfp4HummingMoEMethod"
CORE = "HummingRunnerCore"
LINE = Line(
    "humming",
    "Humming MXFP4 MoE kernels",
    "install humming-kernels==0.1.12 with cuda-python (NVRTC), use the mixed FP8 + "
    "MXFP4-experts checkpoint, and keep moe_runner_backend='humming' (never auto)",
)
HUMMING = Package(
    "humming", "humming-kernels", "pip install humming-kernels==0.1.12 cuda-python (NVRTC)"
)


def args(context: Context, on: bool) -> dict[str, Any]:
    """`auto` silently resolves to flashinfer_mxfp4 for this model: never left to SGLang."""
    return {"moe_runner_backend": "humming" if on else "flashinfer_mxfp4"}


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """Another quantization than the checkpoint's, on any profile."""
    if key == "quantization" and value is not None:
        return (
            "contradicts the checkpoint's quantization (FP8 + MXFP4 experts) that the Humming "
            "and FP8 head levers run on"
        )
    return None


def moe_layers(model: Any, moe_class: type[Any]) -> list[dict[str, Any]]:
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


def kernels(state: HummingState) -> dict[str, Any]:
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


def _draft_layers(live: Live) -> list[dict[str, Any]] | None:
    return moe_layers(live.draft, live.sources.moe_class()) if live.draft is not None else None


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Every MoE layer (target and draft) on Humming, its runner and kernels in capture."""
    if err := error(facts, "moe_target", "moe_draft", "humming", optional=("moe_draft",)):
        return (judged(LINE, False, err),)
    layers = list(facts["moe_target"]) + list(facts.get("moe_draft") or [])
    on = [
        layer
        for layer in layers
        if layer["quant_method"] == METHOD
        and layer["runner_core"] == CORE
        and layer["mxfp4_backend"] == "humming"
    ]
    methods = sorted({layer["quant_method"] for layer in layers})
    if not profile.has(LEVER):
        return (off(LINE, not on, f"MoE layers run {', '.join(methods) or 'nothing'}"),)
    hum = facts["humming"]
    draft_layers = len(facts.get("moe_draft") or [])
    captured = facts.get("capture_calls", {}).get("humming_runner", 0)
    acts = sorted({str(layer["activation_dtype"]) for layer in on})
    mode = "W4A8" if any("float8" in a for a in acts) else "W4A16"
    ok = (
        bool(layers)
        and len(on) == len(layers)
        and captured > 0
        and hum["kernels_captured"] > 0
        and hum["captured_cubins_in_cache"] == hum["kernels_captured"]
    )
    evidence = (
        f"{len(on)}/{len(layers)} MoE layers ({len(layers) - draft_layers} target, "
        f"{draft_layers} draft) on {METHOD}/{CORE}"
        + (f" (others: {', '.join(methods)})" if len(on) != len(layers) else "")
        + f"; runner ran {captured}x in graph capture with {hum['kernels_captured']} JIT "
        f"kernels, {hum['captured_cubins_in_cache']} of them in {hum['cache_dir']} "
        f"({hum['compiler']}); {mode} (activations {', '.join(acts) or '?'})"
    )
    return (judged(LINE, ok, evidence),)


LEVER = Lever(
    name="humming",
    called="the Humming MoE lever",
    called_off="the recipe's FlashInfer MXFP4 MoE",
    lines=(LINE,),
    args=args,
    args_why="`auto` silently resolves to flashinfer_mxfp4 for this model, so the MoE runner "
    "is never left to SGLang: Humming on, the recipe's FlashInfer MXFP4 off",
    free=frozenset(),
    refuse=refuse,
    refuse_env=no_env_refusal,
    packages=(HUMMING,),
    # ling-chat's scheduler evidence reads Humming's state on every profile, and the
    # recipe's MXFP4 MoE is FlashInfer's.
    packages_off=(HUMMING, FLASHINFER),
    runs_on=RunsOn(
        why="Humming's kernels support NVIDIA GPUs from Turing on (vLLM's announcement of "
        "Humming, 2026-10-21)",
        settings={"moe_runner_backend": frozenset({"humming"})},
        min_sm=75,
    ),
    patch="kernel_load",
    facts={
        "moe_target": lambda live: moe_layers(live.target, live.sources.moe_class()),
        "moe_draft": _draft_layers,
        "humming": lambda live: kernels(live.sources.humming()),
        "capture_calls": lambda live: dict(live.sources.capture_calls()),
    },
    reads=("moe_target", "moe_draft", "humming", "capture_calls"),
    judge=judge,
    bytes=ByteTerm(
        why="the MXFP4 experts are the checkpoint's bytes whichever kernel reads them: Humming "
        "changes their time, not their bytes"
    ),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
