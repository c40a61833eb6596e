"""The FP8 LM head: the BF16 157,184 x 2,560 head quantized to FP8 per output channel after
loading, its fastest kernel for this GPU picked and timed at load (patches/fp8_head.py).

Two lines: the head is FP8 through ling-chat's method, its kernel ran in capture and agrees
with the BF16 head (`fp8_head`); it beats the BF16 head by the plan's factor (`fp8_head_speed`).
Off, the head must be left BF16.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.proof_report import ProofLine, Verdict
from app.levers.lever import (
    ByteTerm,
    Context,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    fits_any,
    no_refusal,
)
from app.levers.lines import error, failed, judged, lacking, off
from app.levers.live import Live

METHOD = "LingFp8LMHeadMethod"
"""The class name of ling-chat's FP8 head method, as the evidence reports the head's method."""
FP8_DTYPE = "float8_e4m3fn"
MIN_COSINE = 0.99
"""Least cosine similarity of FP8 vs BF16 logits over the self-test's random hidden states."""
MIN_TOP1 = 0.95
"""Least top-1 agreement of FP8 vs BF16 logits on hidden states equal to head rows (a clear
winner each); random states are near-ties, so their agreement (87-89% on H200) is only shown."""
HEAD_FACTS = (
    *("kernel", "captured_by_kernel", "captured_calls", "cosine_min", "fallback_cosine_min"),
    *("top1_agreement", "selftest_rows", "scale_shape", "bytes_bf16", "bytes_fp8"),
)
"""What the FP8 head line reads from an installed head's facts."""
SPEED_FACTS = (
    *("kernel", "speedup", "timing_us", "min_speedup", "floor_share", "floor_us", "copy_gbps"),
    "candidates_us",
)
"""What the FP8 head speed line reads from an installed head's facts."""
LINE = Line(
    "fp8_head",
    "FP8 LM head",
    "run ling-chat's engine (it installs the FP8 head in the scheduler); the GPU needs "
    "SGLang's CUTLASS FP8 path (sm_89 or newer)",
)
SPEED = Line(
    "fp8_head_speed",
    "FP8 LM head pays off",
    "the FP8 head is slower than BF16 on this GPU: report it, and use --profile humming+nextn "
    "until it is fixed",
)
MARLIN_ENV = "SGLANG_FORCE_FP8_MARLIN"
"""SGLang's switch that runs every FP8 linear on Marlin (layers/quantization/fp8.py), which
the FP8 head refuses at load: it needs SGLang's CUTLASS path."""
TRUE = frozenset({"1", "true", "yes", "y"})
"""What SGLang 0.5.23 reads as true in a boolean variable (environ.py's `EnvBool`)."""


def args(context: Context, on: bool) -> dict[str, Any]:
    """The FP8 head replaces the BF16 matmul that FP32 logits would upcast: exclusive."""
    return {"enable_fp32_lm_head": False} if on else {}


def refuse_env(env: Mapping[str, str], profile: Profile) -> str | None:
    """Marlin's FP8 path, where the head needs CUTLASS."""
    value = env.get(MARLIN_ENV, "")
    if profile.has(LEVER) and value.strip().lower() in TRUE:
        return (
            f"{MARLIN_ENV}={value} contradicts the FP8 LM head lever of profile {profile.name}: "
            "SGLang would run FP8 on Marlin, which has no per-channel FP8 head; unset it"
        )
    return None


def head(model: Any) -> dict[str, Any]:
    """A model's LM head: its module, method, weight and the FP32-logits flags."""
    lm_head = model.lm_head
    weight = getattr(lm_head, "weight", None)
    processor = getattr(model, "logits_processor", None)
    return {
        "module": type(lm_head).__name__,
        "quant_method": type(getattr(lm_head, "quant_method", None)).__name__,
        "weight_dtype": str(weight.dtype).removeprefix("torch.") if weight is not None else None,
        "weight_shape": list(weight.shape) if weight is not None else None,
        "fp32_logits": bool(getattr(processor, "use_fp32_lm_head", False)),
        "config_fp32_logits": bool(getattr(model.config, "enable_lm_head_fp32", False)),
    }


def quantized(live: Live) -> dict[str, Any]:
    """What quantizing the head found, with the installed method's call counters."""
    facts = dict(live.sources.fp8_head_facts())
    if facts.get("installed"):
        cls = live.sources.fp8_head_method()
        facts.update(
            captured_calls=cls.captured_calls,
            captured_by_kernel=dict(cls.captured_by_kernel),
            eager_calls=cls.eager_calls,
        )
    return facts


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The head line, then its speed line."""
    return (_head(facts, profile), _speed(facts, profile))


def _head(facts: Facts, profile: Profile) -> ProofLine:
    if err := error(facts, "head_target", "fp8_head"):
        return judged(LINE, False, err)
    target = facts["head_target"]
    fp8 = facts["fp8_head"]
    if not profile.has(LEVER):
        return off(
            LINE,
            target["weight_dtype"] != FP8_DTYPE and not fp8.get("installed"),
            f"head weight {target['weight_dtype']} via {target['quant_method']}",
        )
    if not fp8.get("installed"):
        return judged(LINE, False, f"head is {target['weight_dtype']} via {target['quant_method']}")
    if missing := lacking(LINE, "fp8_head", fp8, HEAD_FACTS):
        return missing
    kernel = fp8["kernel"]
    in_capture = fp8["captured_by_kernel"].get(kernel, 0)
    ok = (
        target["weight_dtype"] == FP8_DTYPE
        and target["quant_method"] == METHOD
        and in_capture > 0
        and fp8["cosine_min"] >= MIN_COSINE
        and fp8["fallback_cosine_min"] >= MIN_COSINE
        and fp8["top1_agreement"] >= MIN_TOP1
    )
    evidence = (
        f"{target['weight_dtype']} {target['weight_shape']} via {target['quant_method']}, "
        f"scales {fp8['scale_shape']}; kernel {kernel} ran {in_capture}x in graph capture "
        f"({fp8['captured_calls']} head calls in all); self-test of {kernel} vs BF16: "
        f"cosine min {fp8['cosine_min']:.4f} (>= {MIN_COSINE}) on "
        f"{2 * fp8['selftest_rows']} states, top-1 agreement {fp8['top1_agreement']:.1%} "
        f"(>= {MIN_TOP1:.0%}) on {fp8['selftest_rows']} head-row states "
        f"({fp8.get('top1_random', 0):.1%} on near-tied random ones); CUTLASS for longer "
        f"inputs: cosine min {fp8['fallback_cosine_min']:.4f}; "
        f"{fp8['bytes_bf16'] / 1e6:.0f} MB -> {fp8['bytes_fp8'] / 1e6:.0f} MB"
    )
    return judged(LINE, ok, evidence)


def _speed(facts: Facts, profile: Profile) -> ProofLine:
    fp8 = facts.get("fp8_head") or {}
    if not profile.has(LEVER):
        return ProofLine(SPEED.key, SPEED.title, Verdict.OFF, "no FP8 head")
    if not fp8.get("installed"):
        return failed(
            SPEED,
            "no FP8 head was timed",
            "see the FP8 LM head line: there is no FP8 head to time",
        )
    if missing := lacking(SPEED, "fp8_head", fp8, SPEED_FACTS):
        return missing
    speedup = {str(m): float(s) for m, s in fp8["speedup"].items()}
    timing = fp8["timing_us"]
    need = float(fp8["min_speedup"])
    ok = min(speedup.values()) >= need
    share = fp8["floor_share"]
    timed = "; ".join(
        f"M={m}: BF16 {timing['bf16'][m]} us vs FP8 {timing['fp8'][m]} us = {speedup[m]:.2f}x, "
        f"{share[m]:.0%} of the floor"
        for m in sorted(speedup, key=int)
    )
    others = ", ".join(
        f"{name} {_times(times)}"
        for name, times in fp8["candidates_us"].items()
        if name != fp8["kernel"]
    )
    evidence = (
        f"{fp8['kernel']}: {timed} ({fp8['floor_us']} us at the {fp8['copy_gbps']:.0f} GB/s "
        f"copy bandwidth measured at load); needs >= {need:.2f}x; "
        f"timed in CUDA graphs at load against {others}"
    )
    return judged(SPEED, ok, evidence)


def _times(times: Mapping[str, Any]) -> str:
    """A candidate's timings as `a/b us` over M, or why it did not run."""
    values = [times[m] for m in sorted(times, key=int)]
    if all(isinstance(v, int | float) for v in values):
        return "/".join(f"{v:.0f}" for v in values) + " us"
    return "failed (" + next(str(v) for v in values if not isinstance(v, int | float)) + ")"


LEVER = Lever(
    name="fp8_head",
    called="the FP8 LM head lever",
    called_off="the BF16 LM head",
    lines=(LINE, SPEED),
    args=args,
    args_why="SGLang 0.5.23 has no switch for an FP8 head: its patch installs it; FP32 logits, "
    "which would upcast the BF16 matmul the FP8 head replaces, are kept off",
    free=frozenset(),
    refuse=no_refusal,
    refuse_env=refuse_env,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(
        why="SGLang's CUTLASS FP8 path, which the head needs (its Fp8LinearMethod), runs on "
        "sm_89 and newer",
        min_sm=89,
    ),
    patch="fp8_head",
    facts={
        "head_target": lambda live: head(live.target),
        "fp8_head": quantized,
    },
    reads=("head_target", "fp8_head"),
    judge=judge,
    bytes=ByteTerm(
        why="the head's 805 MB of BF16 read per token become 403 MB of FP8 and their scales",
        head="fp8",
    ),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
