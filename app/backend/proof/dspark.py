"""The DSpark proof rules: the `dspark` facts in, one verdict per DSpark lever out.

Pure functions over the `dspark` fact that app/backend/engine/patches/dspark.py collects in
SGLang's scheduler; app/backend/proof/rules.py runs them in place of the NEXTN rules when a
profile's levers ask for DSpark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.backend.proof import FP8_HEAD_METHOD, LACKING_FIX
from app.backend.proof import replayssm as proof_replayssm
from app.core.profiles import DSPARK_BLOCK, DSPARK_WINDOW, Levers
from app.core.proof_report import ProofLine, Verdict

WORKER = "DSparkWorkerV2"
DRAFT_CLASS = "LingDSparkModel"
FP8_DTYPE = "float8_e4m3fn"
FP8_LINEAR_METHOD = "Fp8LinearMethod"
"""SGLang's FP8 linear method: `speculative_draft_model_quantization="fp8"` quantizes the
draft's BF16 layer linears with it at load (one scale a row on CUTLASS-capable GPUs)."""
GRAPH_RUNNERS = ("target_verify", "draft_decode")

TITLES = {
    "dspark": f"DSpark draft ({DRAFT_CLASS} in {WORKER})",
    "dspark_head": "DSpark draft projects through the target's FP8 head",
    "dspark_block": f"DSpark block {DSPARK_BLOCK} / verify window {DSPARK_WINDOW}",
    "replayssm": proof_replayssm.TITLE,
    "dspark_graphs": "DSpark draft and verify graphs captured",
    "dspark_weights": "DSpark draft layers in FP8 (opt-in)",
}
FIXES = {
    "dspark": "run the dspark profile with inclusionAI/Ling-3.0-flash-dspark as the draft "
    "(speculative_algorithm DSPARK)",
    "dspark_head": "run ling-chat's engine with the FP8 head: the draft must hold the "
    "target's own head module, whose FP8 method projects its hidden states",
    "dspark_block": f"use the draft's block size {DSPARK_BLOCK} "
    f"(speculative_num_draft_tokens {DSPARK_WINDOW})",
    "replayssm": proof_replayssm.FIX,
    "dspark_weights": "run profile dspark+fp8-draft as ling-chat sets it "
    "(speculative_draft_model_quantization fp8)",
    "dspark_graphs": "do not disable CUDA graphs; keep >= 1 GB free after the target's "
    "graphs (SGLang drops the draft's graph below that)",
}


def _line(key: str, ok: bool, evidence: str) -> ProofLine:
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine(key, TITLES[key], verdict, evidence, "" if ok else FIXES[key])


def _dspark(facts: Mapping[str, Any]) -> Mapping[str, Any] | str:
    """The `dspark` fact, or why it cannot be judged."""
    return _fact(facts, "dspark", "no DSpark worker")


def _fact(facts: Mapping[str, Any], key: str, absent: str) -> Mapping[str, Any] | str:
    """The fact `key`, or why it cannot be judged (`absent`: what its absence means)."""
    value = facts.get(key)
    if value is None:
        return f"{key}: not reported by the engine ({absent})"
    if "error" in value:
        return f"{key}: {value['error']}"
    return value


def engaged(facts: Mapping[str, Any], levers: Levers) -> ProofLine:
    """The DSpark worker runs the Ling DSpark draft class."""
    d = _dspark(facts)
    if isinstance(d, str):
        return _line("dspark", False, d)
    ok = d["worker"] == WORKER and d["draft_class"] == DRAFT_CLASS
    return _line(
        "dspark",
        ok,
        f"{d['worker']} with {d['draft_class']} ({d['draft_layers']} layers, markov head "
        f"{d['markov_head']})",
    )


def head(facts: Mapping[str, Any], levers: Levers) -> ProofLine:
    """The draft's head is the target's module, FP8 through ling-chat's method in capture."""
    d = _dspark(facts)
    if isinstance(d, str):
        return _line("dspark_head", False, d)
    h = d["head"]
    captured = d["projections_captured"]
    fp8_calls = d["fp8_calls_in_draft_capture"]
    ok = (
        h["is_target_head"]
        and h["embed_is_target_embed"]
        and h["weight_dtype"] == FP8_DTYPE
        and h["quant_method"] == FP8_HEAD_METHOD
        and h["applies_quant_method"]
        and captured.get(FP8_HEAD_METHOD, 0) > 0
        and set(captured) == {FP8_HEAD_METHOD}
        and fp8_calls > 0
    )
    methods = ", ".join(f"{m} {n}x" for m, n in sorted(captured.items())) or "none"
    return _line(
        "dspark_head",
        ok,
        f"draft.lm_head is target.lm_head: {h['is_target_head']}; embeddings shared: "
        f"{h['embed_is_target_embed']}; head {h['weight_dtype']} via {h['quant_method']} "
        f"(SGLang applies it: {h['applies_quant_method']}); draft projections in graph "
        f"capture: {methods}; {FP8_HEAD_METHOD}.apply ran {fp8_calls}x inside them",
    )


def block(facts: Mapping[str, Any], levers: Levers) -> ProofLine:
    """The worker's block size (gamma) and verify window."""
    d = _dspark(facts)
    if isinstance(d, str):
        return _line("dspark_block", False, d)
    ok = (d["gamma"], d["verify_window"]) == (DSPARK_BLOCK, DSPARK_WINDOW)
    return _line(
        "dspark_block",
        ok,
        f"gamma {d['gamma']}, verify window {d['verify_window']} tokens "
        f"(draft config block_size {d['config_block_size']})",
    )


def replayssm(facts: Mapping[str, Any], levers: Levers) -> ProofLine:
    """The KDA pool folds verify windows through a ring that is a power of two >= 2x window."""
    d = _dspark(facts)
    if isinstance(d, str):
        return _line("replayssm", False, d)
    ring = _fact(facts, "replayssm", "no KDA state pool")
    if isinstance(ring, str):
        return _line("replayssm", False, ring)
    return _line("replayssm", *proof_replayssm.judge(ring, d["verify_window"] or 0))


def graphs(facts: Mapping[str, Any], levers: Levers) -> ProofLine:
    """The target's verify graph and the draft's decode graph were captured."""
    d = _dspark(facts)
    if isinstance(d, str):
        return _line("dspark_graphs", False, d)
    runners = d["graph_runners"]
    if not all(isinstance(runners.get(name), Mapping) for name in GRAPH_RUNNERS):
        return ProofLine(
            "dspark_graphs",
            TITLES["dspark_graphs"],
            Verdict.FAIL,
            "the dspark facts name graph runners without what they captured",
            LACKING_FIX,
        )
    missing = [name for name in GRAPH_RUNNERS if not runners[name]["captured"]]
    held = ", ".join(
        f"{n} {runners[n]['graphs']} graph(s) at batch {runners[n]['capture_bs']}"
        for n in GRAPH_RUNNERS
        if n not in missing
    )
    absent = ", ".join(f"{n} (runner {runners[n]['runner']})" for n in missing)
    evidence = f"captured: {held or 'none'}" + (f"; not captured: {absent}" if missing else "")
    return _line("dspark_graphs", not missing, evidence)


def draft_weights(facts: Mapping[str, Any], levers: Levers) -> ProofLine:
    """Every linear of the draft's layers is FP8 through SGLang's FP8 method (the FP8 draft
    lever's line; a profile without the lever has no such line: `rules.rules_of`)."""
    title = TITLES["dspark_weights"]
    weights = facts.get("dspark_weights")
    if weights is None:
        why = "dspark_weights: not reported by the engine"
        return ProofLine("dspark_weights", title, Verdict.FAIL, why, LACKING_FIX)
    if "error" in weights:
        why = f"dspark_weights: {weights['error']}"
        return ProofLine("dspark_weights", title, Verdict.FAIL, why, FIXES["dspark_weights"])
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
    ok = count > 0 and methods == {FP8_LINEAR_METHOD: count} and dtypes == {FP8_DTYPE: count}
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine(
        "dspark_weights", title, verdict, evidence, "" if ok else FIXES["dspark_weights"]
    )


RULES = (engaged, head, draft_weights, block, replayssm, graphs)
