"""The proof rules: evidence read from the running model in, one verdict per lever out.

Pure functions over the `ling_chat_proof` facts that app/backend/engine/patches/evidence.py
collects inside SGLang's scheduler (plus the warm-up accept length measured by the
backend). Nothing here looks at the arguments the engine was started with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from app.backend.proof import FP8_HEAD_METHOD, LACKING_FIX
from app.backend.proof import dspark as proof_dspark
from app.backend.proof import graphs as proof_graphs
from app.backend.proof import host as proof_host
from app.backend.proof import replayssm as proof_replayssm
from app.core.profiles import NEXTN_DRAFT_TOKENS, NEXTN_STEPS, NEXTN_TOPK, PROFILES, Levers
from app.core.proof_report import ProofLine, ProofReport, Verdict

HUMMING_METHOD = "Mxfp4HummingMoEMethod"
HUMMING_CORE = "HummingRunnerCore"
FP8_DTYPE = "float8_e4m3fn"
MIN_COSINE = 0.99
"""Least cosine similarity of FP8 vs BF16 logits over the self-test's random hidden states."""
MIN_TOP1 = 0.95
"""Least top-1 agreement of FP8 vs BF16 logits on hidden states equal to head rows (a clear
winner each); random states are near-ties, so their agreement (87-89% on H200) is only shown."""
GRAPH_PHASES_NEXTN = ("target_verify", "draft_decode", "draft_extend")
GRAPH_PHASES_PLAIN = ("decode",)
FP8_HEAD_FACTS = (
    *("kernel", "captured_by_kernel", "captured_calls", "cosine_min", "fallback_cosine_min"),
    *("top1_agreement", "selftest_rows", "scale_shape", "bytes_bf16", "bytes_fp8"),
)
"""What the FP8 head line reads from an installed head's facts."""
FP8_SPEED_FACTS = (
    *("kernel", "speedup", "timing_us", "min_speedup", "floor_share", "floor_us", "copy_gbps"),
    "candidates_us",
)
"""What the FP8 head speed line reads from an installed head's facts."""

Facts = Mapping[str, Any]
Rule = Callable[[Facts, Levers], ProofLine]


def build_report(
    facts: Facts,
    *,
    profile: str,
    min_accept_length: float,
    warmup_accept_length: float | None,
) -> ProofReport:
    """Judge every lever of `profile` from the facts; see the module docstring."""
    levers = PROFILES[profile]
    lines = proof_graphs.follow_graphs([rule(facts, levers) for rule in rules_of(levers)])
    lines.append(_accept(levers, min_accept_length, warmup_accept_length))
    return ProofReport(
        profile=profile,
        lines=tuple(lines),
        facts={**facts, "warmup_accept_length": warmup_accept_length},
    )


def refusal_report(profile: str, key: str, message: str) -> ProofReport:
    """The report when the engine refused to start (a LING_CHAT_REFUSED error)."""
    title = TITLES.get(key, key)
    line = ProofLine(key, title, Verdict.FAIL, message, FIXES.get(key, ""))
    return ProofReport(profile=profile, lines=(line,), facts={"refused": {key: message}})


TITLES = {
    "humming": "Humming MXFP4 MoE kernels",
    "fp8_head": "FP8 LM head",
    "fp8_head_speed": "FP8 LM head pays off",
    "fp32_head": "FP32 LM head off (exclusive with FP8)",
    "router": "BF16 router gates (opt-in)",
    "shared_head": "Draft shares the target's LM head module",
    "nextn": "NEXTN MTP 3 steps / top-1 / 4 tokens",
    "cuda_graphs": "CUDA graphs captured",
    "no_faking": "No result-faking variables",
    "accept_length": "Warm-up accept length",
    **proof_dspark.TITLES,
    **proof_host.TITLES,
}
FIXES = {
    "humming": "install humming-kernels==0.1.12 with cuda-python (NVRTC), use the mixed "
    "FP8 + MXFP4-experts checkpoint, and keep moe_runner_backend='humming' (never auto)",
    "fp8_head": "run ling-chat's engine (it installs the FP8 head in the scheduler); the "
    "GPU needs SGLang's CUTLASS FP8 path (sm_89 or newer)",
    "fp8_head_speed": "the FP8 head is slower than BF16 on this GPU: report it, and use "
    "--profile humming+nextn until it is fixed",
    "fp32_head": "unset enable_fp32_lm_head and the config's enable_lm_head_fp32",
    "router": "run profile stack+bf16-router as ling-chat sets it (json_model_override_args "
    "router_dtype bf16)",
    "shared_head": "run ling-chat's engine: stock SGLang shares only the weight tensor, "
    "which the draft misreads once the head is FP8",
    "nextn": "use a checkpoint with num_nextn_predict_layers=1 and let ling-chat set "
    "NEXTN 3/1/4 (draft path = model path)",
    "cuda_graphs": "do not disable CUDA graphs (disable_cuda_graph, "
    "cuda_graph_backend_decode=disabled, SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH); use an "
    "attention backend that supports them (fa3 or triton, not torch_native or flex)",
    "no_faking": "unset the listed variables",
    "accept_length": "check the draft (MTP) weights and the shared head; a collapsed "
    "accept length makes NEXTN slower than no speculation",
    **proof_dspark.FIXES,
    **proof_host.FIXES,
}


def _line(key: str, ok: bool, evidence: str) -> ProofLine:
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine(key, TITLES[key], verdict, evidence, "" if ok else FIXES[key])


def _off(key: str, really_off: bool, evidence: str) -> ProofLine:
    """A lever turned off by request: OFF when verified off, FAIL when it is on anyway."""
    if really_off:
        return ProofLine(key, TITLES[key], Verdict.OFF, f"off by request; {evidence}")
    return ProofLine(
        key, TITLES[key], Verdict.FAIL, f"off by request but engaged: {evidence}", FIXES[key]
    )


def _lacking(key: str, facts: Mapping[str, Any], needed: tuple[str, ...]) -> ProofLine | None:
    """A failed line naming the `needed` facts that `facts` lack, if any."""
    missing = [name for name in needed if name not in facts]
    if not missing:
        return None
    evidence = f"the fp8_head facts lack {', '.join(missing)}"
    return ProofLine(key, TITLES[key], Verdict.FAIL, evidence, LACKING_FIX)


def _error(facts: Facts, *keys: str) -> str | None:
    """The collection error of any of `keys`, if one could not be read."""
    for key in keys:
        value = facts.get(key)
        if value is None and key not in OPTIONAL:
            return f"{key}: not reported by the engine"
        if isinstance(value, Mapping) and "error" in value:
            return f"{key}: {value['error']}"
    return None


OPTIONAL = {"moe_draft", "head_draft", "sharing", "speculative"}


def _humming(facts: Facts, levers: Levers) -> ProofLine:
    if err := _error(facts, "moe_target", "moe_draft", "humming"):
        return _line("humming", False, err)
    layers = list(facts["moe_target"]) + list(facts.get("moe_draft") or [])
    on = [
        layer
        for layer in layers
        if layer["quant_method"] == HUMMING_METHOD
        and layer["runner_core"] == HUMMING_CORE
        and layer["mxfp4_backend"] == "humming"
    ]
    methods = sorted({layer["quant_method"] for layer in layers})
    if not levers.humming:
        return _off("humming", not on, f"MoE layers run {', '.join(methods) or 'nothing'}")
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
        f"{draft_layers} draft) on {HUMMING_METHOD}/{HUMMING_CORE}"
        + (f" (others: {', '.join(methods)})" if len(on) != len(layers) else "")
        + f"; runner ran {captured}x in graph capture with {hum['kernels_captured']} JIT "
        f"kernels, {hum['captured_cubins_in_cache']} of them in {hum['cache_dir']} "
        f"({hum['compiler']}); {mode} (activations {', '.join(acts) or '?'})"
    )
    return _line("humming", ok, evidence)


def _fp8_head(facts: Facts, levers: Levers) -> ProofLine:
    if err := _error(facts, "head_target", "fp8_head"):
        return _line("fp8_head", False, err)
    head = facts["head_target"]
    fp8 = facts["fp8_head"]
    if not levers.fp8_head:
        return _off(
            "fp8_head",
            head["weight_dtype"] != FP8_DTYPE and not fp8.get("installed"),
            f"head weight {head['weight_dtype']} via {head['quant_method']}",
        )
    if not fp8.get("installed"):
        return _line(
            "fp8_head", False, f"head is {head['weight_dtype']} via {head['quant_method']}"
        )
    if lacking := _lacking("fp8_head", fp8, FP8_HEAD_FACTS):
        return lacking
    kernel = fp8["kernel"]
    in_capture = fp8["captured_by_kernel"].get(kernel, 0)
    ok = (
        head["weight_dtype"] == FP8_DTYPE
        and head["quant_method"] == FP8_HEAD_METHOD
        and in_capture > 0
        and fp8["cosine_min"] >= MIN_COSINE
        and fp8["fallback_cosine_min"] >= MIN_COSINE
        and fp8["top1_agreement"] >= MIN_TOP1
    )
    evidence = (
        f"{head['weight_dtype']} {head['weight_shape']} via {head['quant_method']}, "
        f"scales {fp8['scale_shape']}; kernel {kernel} ran {in_capture}x in graph capture "
        f"({fp8['captured_calls']} head calls in all); self-test of {kernel} vs BF16: "
        f"cosine min {fp8['cosine_min']:.4f} (>= {MIN_COSINE}) on "
        f"{2 * fp8['selftest_rows']} states, top-1 agreement {fp8['top1_agreement']:.1%} "
        f"(>= {MIN_TOP1:.0%}) on {fp8['selftest_rows']} head-row states "
        f"({fp8.get('top1_random', 0):.1%} on near-tied random ones); CUTLASS for longer "
        f"inputs: cosine min {fp8['fallback_cosine_min']:.4f}; "
        f"{fp8['bytes_bf16'] / 1e6:.0f} MB -> {fp8['bytes_fp8'] / 1e6:.0f} MB"
    )
    return _line("fp8_head", ok, evidence)


def _fp8_speed(facts: Facts, levers: Levers) -> ProofLine:
    fp8 = facts.get("fp8_head") or {}
    if not levers.fp8_head:
        return ProofLine("fp8_head_speed", TITLES["fp8_head_speed"], Verdict.OFF, "no FP8 head")
    if not fp8.get("installed"):
        return ProofLine(
            "fp8_head_speed",
            TITLES["fp8_head_speed"],
            Verdict.FAIL,
            "no FP8 head was timed",
            "see the FP8 LM head line: there is no FP8 head to time",
        )
    if lacking := _lacking("fp8_head_speed", fp8, FP8_SPEED_FACTS):
        return lacking
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
        f"{name} {_fmt_us(times)}"
        for name, times in fp8["candidates_us"].items()
        if name != fp8["kernel"]
    )
    evidence = (
        f"{fp8['kernel']}: {timed} ({fp8['floor_us']} us at the {fp8['copy_gbps']:.0f} GB/s "
        f"copy bandwidth measured at load); needs >= {need:.2f}x; "
        f"timed in CUDA graphs at load against {others}"
    )
    return _line("fp8_head_speed", ok, evidence)


def _fmt_us(times: Mapping[str, Any]) -> str:
    """A candidate's timings as `a/b us` over M, or why it did not run."""
    values = [times[m] for m in sorted(times, key=int)]
    if all(isinstance(v, int | float) for v in values):
        return "/".join(f"{v:.0f}" for v in values) + " us"
    return "failed (" + next(str(v) for v in values if not isinstance(v, int | float)) + ")"


def _fp32_head(facts: Facts, levers: Levers) -> ProofLine:
    if err := _error(facts, "head_target"):
        return _line("fp32_head", False, err)
    head = facts["head_target"]
    on = head["fp32_logits"] or head["config_fp32_logits"]
    flags = (
        f"logits processor use_fp32_lm_head={head['fp32_logits']}, "
        f"config enable_lm_head_fp32={head['config_fp32_logits']}"
    )
    if levers.fp32_logits:  # this profile's BF16-head recipe asks for FP32 logits
        verdict = Verdict.PASS if on else Verdict.FAIL
        return ProofLine("fp32_head", "FP32 LM head (official recipe)", verdict, flags)
    return _line("fp32_head", not on, flags)


def _router(facts: Facts, levers: Levers) -> ProofLine:
    """Every router gate (target, NEXTN draft) in BF16 (the BF16 router lever's line; a
    profile without the lever has no such line: `rules_of`)."""
    title = TITLES["router"]
    if err := _error(facts, "router"):
        fix = LACKING_FIX if "router" not in facts else FIXES["router"]
        return ProofLine("router", title, Verdict.FAIL, err, fix)
    router = facts["router"]
    models = {"target": router["target"], "draft": router.get("draft")}
    dtypes: Counter[str] = Counter()
    for gates in filter(None, models.values()):
        dtypes.update(gates["dtypes"])
    counts = ", ".join(
        f"{sum(gates['dtypes'].values())} {name}" for name, gates in models.items() if gates
    )
    nbytes = sum(gates["bytes"] for gates in filter(None, models.values()))
    evidence = (
        f"{sum(dtypes.values())} router gates ({counts}): "
        + ", ".join(f"{t} {n}" for t, n in sorted(dtypes.items()))
        + f", {nbytes / 1e6:.1f} MB; config router_dtype {router['config_router_dtype']!r}"
    )
    if not dtypes:
        evidence = "no router gate found in the model"
    ok = set(dtypes) == {"bfloat16"}
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine("router", title, verdict, evidence, "" if ok else FIXES["router"])


def _shared_head(facts: Facts, levers: Levers) -> ProofLine:
    sharing = facts.get("sharing")
    if not levers.nextn:
        return _off("shared_head", sharing is None, "no draft model")
    if err := _error(facts, "sharing"):
        return _line("shared_head", False, err)
    if sharing is None:
        return _line("shared_head", False, "no draft model is running")
    draft = facts.get("head_draft") or {}
    ok = bool(sharing["head_module_shared"] and sharing["embed_shared"])
    evidence = (
        f"draft.lm_head is target.lm_head: {sharing['head_module_shared']}; "
        f"embeddings shared: {sharing['embed_shared']}; draft head reads "
        f"{draft.get('weight_dtype')} via {draft.get('quant_method')}"
    )
    return _line("shared_head", ok, evidence)


def _nextn(facts: Facts, levers: Levers) -> ProofLine:
    spec = facts.get("speculative")
    if not levers.nextn:
        return _off("nextn", spec is None, "no speculative worker")
    if err := _error(facts, "speculative"):
        return _line("nextn", False, err)
    if spec is None:
        return _line("nextn", False, "no speculative worker is running")
    shape = (spec["num_steps"], spec["topk"], spec["num_draft_tokens"])
    ok = shape == (NEXTN_STEPS, NEXTN_TOPK, NEXTN_DRAFT_TOKENS)
    return _line(
        "nextn",
        ok,
        f"{spec['worker']} with {spec['draft_worker']}: {shape[0]} steps, top-{shape[1]}, "
        f"{shape[2]} draft tokens",
    )


def _replayssm(facts: Facts, levers: Levers) -> ProofLine:
    if err := _error(facts, "replayssm", "speculative"):
        return _line("replayssm", False, err)
    if facts.get("speculative") is None:
        return _line("replayssm", False, "no speculative worker is running")
    window = facts["speculative"]["num_draft_tokens"] or 0
    return _line("replayssm", *proof_replayssm.judge(facts["replayssm"], window))


def _graphs(facts: Facts, levers: Levers) -> ProofLine:
    if err := _error(facts, "cuda_graphs"):
        return _line("cuda_graphs", False, err)
    fact = facts["cuda_graphs"]
    need, note = proof_graphs.needed(
        GRAPH_PHASES_NEXTN if levers.nextn else GRAPH_PHASES_PLAIN,
        fact.get("draft_extend_backend"),
    )
    judged = proof_graphs.judge(fact["phases"], need)
    if judged is None:
        evidence = "the cuda_graphs facts name phases without what their runners captured"
        return ProofLine("cuda_graphs", TITLES["cuda_graphs"], Verdict.FAIL, evidence, LACKING_FIX)
    ok, evidence = judged
    return _line("cuda_graphs", ok, f"{evidence}; {note}" if note else evidence)


def _no_faking(facts: Facts, levers: Levers) -> ProofLine:
    if err := _error(facts, "env"):
        return _line("no_faking", False, err)
    set_vars = {k: v for k, v in facts["env"].items() if v not in (None, "")}
    evidence = (
        "set: " + ", ".join(f"{k}={v}" for k, v in set_vars.items())
        if set_vars
        else f"unset in the scheduler: {', '.join(facts['env'])}"
    )
    return _line("no_faking", not set_vars, evidence)


def _accept(levers: Levers, minimum: float, measured: float | None) -> ProofLine:
    if not (levers.nextn or levers.dspark):
        return ProofLine("accept_length", TITLES["accept_length"], Verdict.OFF, "no speculation")
    if measured is None:
        return _line("accept_length", False, "no accept length was measured in the warm-up")
    return _line(
        "accept_length",
        measured >= minimum,
        f"{measured:.2f} tokens per verify round in the warm-up (needs >= {minimum:.2f})",
    )


RULES: tuple[Rule, ...] = (
    _graphs,  # first: the Humming and FP8 head lines count calls made in graph capture
    _humming,
    _fp8_head,
    _fp8_speed,
    _fp32_head,
    _router,
    _shared_head,
    _nextn,
    _no_faking,
    proof_host.gc_frozen,
    proof_host.fast_cores,
)
REPLAYSSM_RULES: tuple[Rule, ...] = (
    *RULES[: RULES.index(_nextn) + 1],
    _replayssm,
    proof_host.prepared_commit,
    *RULES[RULES.index(_nextn) + 1 :],
)
"""The rules of a NEXTN profile with ReplaySSM verify: its ring's and its commit's lines
after NEXTN's."""
DSPARK_RULES: tuple[Rule, ...] = (
    proof_dspark.graphs,  # first, as the graphs line of the NEXTN profiles
    _humming,
    _fp8_head,
    _fp8_speed,
    _fp32_head,
    _router,
    *(rule for rule in proof_dspark.RULES if rule is not proof_dspark.graphs),
    _no_faking,
    proof_host.gc_frozen,
    proof_host.fast_cores,
)
"""The rules of a DSpark profile: its draft replaces the NEXTN lines."""


LEVER_LINES: dict[Rule, Callable[[Levers], bool]] = {
    _router: lambda levers: levers.bf16_router,
    proof_dspark.draft_weights: lambda levers: levers.fp8_draft,
}
"""The lines of opt-in levers, judged only in a profile with the lever."""


def rules_of(levers: Levers) -> tuple[Rule, ...]:
    """The rules that judge a profile with these levers (before the accept-length line)."""
    rules = DSPARK_RULES if levers.dspark else REPLAYSSM_RULES if levers.replayssm else RULES
    return tuple(rule for rule in rules if LEVER_LINES.get(rule, lambda _: True)(levers))
