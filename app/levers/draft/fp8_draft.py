"""The FP8 DSpark draft (opt-in, `dspark+fp8-draft`): the draft's layer linears quantized to
FP8 at load by SGLang's online FP8 (`speculative_draft_model_quantization fp8`, one scale a
row); its `fc` and Markov head, plain torch linears, stay BF16. It changes the draft's
numerics, so no default profile has it, and only its own profile has its line.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.core.proof_report import ProofLine
from app.levers.lever import (
    ByteTerm,
    Context,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    no_env_refusal,
)
from app.levers.lines import LACKING_FIX, failed, judged
from app.levers.live import Live
from app.levers.model.fp8_head import FP8_DTYPE

KEY = "speculative_draft_model_quantization"
QUANTIZATION = "fp8"
"""SGLang's quantization for the FP8 DSpark draft: its layers' linears quantized at load."""
WHY = (
    "SGLang's online FP8 (one scale a row) of the DSpark draft's layer linears: 0.50B of its "
    "1.36B BF16 parameters (its `fc` and Markov head are plain torch linears SGLang leaves "
    "BF16), so a round reads 2.22 GB of it instead of 2.72 (byte model: 3.3% of a DSpark "
    "round's bytes); with its QKV quantized the draft also loses its fused BF16 KV write of "
    "the context (models/dspark.py)"
)
"""Why the lever's one server argument (docs/engine-settings.md's opt-in table)."""
LINEAR_METHOD = "Fp8LinearMethod"
"""SGLang's FP8 linear method: `speculative_draft_model_quantization="fp8"` quantizes the
draft's BF16 layer linears with it at load (one scale a row on CUTLASS-capable GPUs)."""
LINE = Line(
    "dspark_weights",
    "DSpark draft layers in FP8 (opt-in)",
    "run profile dspark+fp8-draft as ling-chat sets it (speculative_draft_model_quantization fp8)",
)


def args(context: Context, on: bool) -> dict[str, Any]:
    """The draft model's quantization."""
    return {KEY: QUANTIZATION} if on else {}


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """A quantized draft on a profile without the lever (NEXTN's too)."""
    if not profile.has(LEVER) and key == KEY and value not in (None, "unquant"):
        return f"contradicts {LEVER.called_off} of profile {profile.name}"
    return None


def draft_weights(draft: Any) -> dict[str, Any]:
    """The draft's layer linears by quant method and weight dtype, and the bytes of its own
    parameters by dtype (not the target's embedding and head, which it holds too)."""
    methods: Counter[str] = Counter()
    dtypes: Counter[str] = Counter()
    for _name, module in draft.layers.named_modules():
        method, weight = getattr(module, "quant_method", None), getattr(module, "weight", None)
        if method is None or weight is None:  # attention's KV-cache method has no weight
            continue
        methods[type(method).__name__] += 1
        dtypes[_dtype(weight)] += 1
    shared = {
        id(param)
        for module in (draft.lm_head, draft.embed_tokens)
        if module is not None
        for param in module.parameters()
    }
    own: Counter[str] = Counter()
    for param in draft.parameters():
        if id(param) not in shared:
            own[_dtype(param)] += param.numel() * param.element_size()
    return {
        "layer_linears": dict(methods),
        "layer_linear_dtypes": dict(dtypes),
        "own_bytes": dict(own),
    }


def _dtype(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _collect(live: Live) -> dict[str, Any] | None:
    return draft_weights(live.spec.draft_model) if live.dspark else None


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Every linear of the draft's layers is FP8 through SGLang's FP8 method; no line on a
    profile without the lever."""
    if not profile.has(LEVER):
        return ()
    weights = facts.get("dspark_weights")
    if weights is None:
        return (failed(LINE, "dspark_weights: not reported by the engine", LACKING_FIX),)
    if "error" in weights:
        return (judged(LINE, False, f"dspark_weights: {weights['error']}"),)
    methods, dtypes = weights["layer_linears"], weights["layer_linear_dtypes"]
    count = sum(methods.values())
    own = ", ".join(f"{t} {n / 1e9:.2f} GB" for t, n in sorted(weights["own_bytes"].items()))
    evidence = (
        f"{count} layer linears: "
        + ", ".join(f"{m} {n}" for m, n in sorted(methods.items()))
        + f" ({', '.join(f'{t} {n}' for t, n in sorted(dtypes.items()))}); "
        f"the draft's own weights: {own or 'none'}"
    )
    if count == 0:
        evidence = "no linear found in the draft's layers"
    ok = count > 0 and methods == {LINEAR_METHOD: count} and dtypes == {FP8_DTYPE: count}
    return (judged(LINE, ok, evidence),)


def fits(profile: Profile) -> str | None:
    """It quantizes the DSpark draft."""
    return (
        None
        if profile.has("dspark")
        else "the FP8 draft lever quantizes the DSpark draft: it needs dspark"
    )


LEVER = Lever(
    name="fp8_draft",
    called="the FP8 draft lever",
    called_off="the draft's own weights",
    lines=(LINE,),
    args=args,
    args_why=WHY,
    free=frozenset(),
    refuse=refuse,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(
        why="SGLang's online FP8 linears, on its CUTLASS FP8 path (sm_89 and newer)",
        min_sm=89,
    ),
    patch=None,
    facts={"dspark_weights": _collect},
    reads=("dspark_weights",),
    judge=judge,
    bytes=ByteTerm(
        why="the draft's layer linears are read in FP8 with a scale a row, not BF16",
        draft_linears="fp8",
    ),
    fits=fits,
    draft_window=None,
    validate=None,
)
