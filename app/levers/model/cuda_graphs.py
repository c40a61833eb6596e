"""CUDA graphs: each phase a profile runs is replayed from a captured graph (the recipe's
batch-1 decode graphs; prefill graphs off, as the recipe sets).

SGLang 0.5.23's `graph_memory_usage` lists all six phases whether or not they were captured,
so the facts read each phase's runner instead: a phase is captured only when its runner is a
graph runner (not missing, not the eager runner put in its place) holding at least one graph.
On a DSpark profile the line reads the DSpark fact's runners (target verify, draft decode).
The line comes first: the Humming and FP8 head lines count what ran in capture, and point at
this one when a phase was not captured (`follow_graphs`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.core.proof_report import ProofLine, Verdict
from app.levers.backends import GRAPH_ATTENTION, attention
from app.levers.lever import (
    ByteTerm,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    fits_any,
    no_args,
)
from app.levers.lines import LACKING_FIX, error, fact, failed, judged
from app.levers.live import Live

LINE = Line(
    "cuda_graphs",
    "CUDA graphs captured",
    "do not disable CUDA graphs (disable_cuda_graph, cuda_graph_backend_decode=disabled, "
    "SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH); use an attention backend that supports them "
    "(fa3 or triton, not torch_native or flex)",
)
DSPARK_LINE = Line(
    "dspark_graphs",
    "DSpark draft and verify graphs captured",
    "do not disable CUDA graphs; keep >= 1 GB free after the target's graphs (SGLang drops "
    "the draft's graph below that)",
)
NEXTN_PHASES = ("target_verify", "draft_decode", "draft_extend")
PLAIN_PHASES = ("decode",)
DSPARK_RUNNERS = ("target_verify", "draft_decode")
RECIPE_PREFILL = "cuda_graph_backend_prefill=disabled"
CAPTURE_LINES = frozenset({"humming", "fp8_head", "dspark_head"})
"""Lines that count what ran while a graph was being captured."""
NO_GRAPHS_FIX = (
    "see the CUDA graphs line: without its graphs nothing runs in capture, which this line "
    "counts; fix that first"
)
EAGER_DRAFT_EXTEND: frozenset[str] = frozenset({"FlashInferMLAAttnBackend"})
"""Draft-extend attention backends SGLang 0.5.23 captures no graph for (its
`graph_supported_backend_types` in speculative/eagle_worker_v2.py lists FlashInfer's MHA backend,
not its MLA one): the official Spark recipe's FlashInfer attention runs NEXTN's draft extend
eagerly, as it does here on sm_12x."""
OFF_FLAGS = ("disable_cuda_graph", "disable_decode_cuda_graph")
"""SGLang 0.5.23's legacy switches, which the per-phase backend ling-chat sets outranks."""
EXTEND_ENV = "SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH"
TRUE = frozenset({"1", "true", "yes", "on"})


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """A switch that turns decode graphs off (or would do nothing, outranked)."""
    if key in OFF_FLAGS and value not in (None, False, "false", "False"):
        return (
            f"contradicts {LEVER.called}; SGLang 0.5.23 would also let ling-chat's "
            "cuda_graph_backend_decode=full outrank it, so it would silently do nothing"
        )
    if key == "cuda_graph_backend_decode" and value == "disabled":
        return f"contradicts {LEVER.called}"
    if key == "cuda_graph_config" and isinstance(value, Mapping):
        decode = value.get("decode")
        if isinstance(decode, Mapping) and decode.get("backend") == "disabled":
            return f"(decode backend disabled) contradicts {LEVER.called}"
    return None


def refuse_env(env: Mapping[str, str], profile: Profile) -> str | None:
    """NEXTN's draft-extend graph turned off."""
    extend = env.get(EXTEND_ENV, "")
    if profile.has("nextn") and extend.strip().lower() in TRUE:
        return (
            f"{EXTEND_ENV}={extend} contradicts {LEVER.called} of profile {profile.name}: "
            "NEXTN's draft-extend graph is needed; unset it"
        )
    return None


def graph_runner(runner: Any, eager: Any = None) -> dict[str, Any]:
    """One phase's runner: its class, the sizes it captured (batch sizes; tokens for prefill)
    and how many graphs it holds (`eager`: the eager runner SGLang puts in place of a graph
    it did not capture)."""
    table = getattr(getattr(runner, "backend", None), "_graphs", None)
    sizes = getattr(runner, "capture_bs", None) or getattr(runner, "capture_num_tokens", None)
    if runner is None or runner is eager or (table is None and not sizes):
        name = None if runner is None else type(runner).__name__
        return {"runner": name, "captured": False, "graphs": 0, "capture_bs": []}
    sizes = sorted(int(size) for size in sizes or ())
    graphs = len(table) if isinstance(table, Mapping) else len(sizes)
    return {
        "runner": type(runner).__name__,
        "captured": graphs > 0,
        "graphs": graphs,
        "capture_bs": sizes,
    }


def target_phases(model_runner: Any, speculative: bool) -> dict[str, dict[str, Any]]:
    """The target's prefill graph and its decode graph, which verifies when it speculates."""
    eager = getattr(model_runner, "eager_runner", None)
    decode = "target_verify" if speculative else "decode"
    return {
        "prefill": graph_runner(getattr(model_runner, "prefill_cuda_graph_runner", None), eager),
        decode: graph_runner(getattr(model_runner, "decode_cuda_graph_runner", None), eager),
    }


def graphs(live: Live) -> dict[str, Any]:
    """Each phase's CUDA graphs as its runner holds them, and SGLang's memory figures
    (which list every phase, captured or not)."""
    scheduler, spec = live.scheduler, live.spec
    phases = target_phases(scheduler.tp_worker.model_runner, spec is not None)
    draft = live.draft_worker
    extend_backend = None
    if draft is not None and not live.dspark:  # DSpark's are in its own fact
        extend = getattr(draft, "cuda_graph_runner_for_draft_extend", None)
        phases["draft_decode"] = graph_runner(getattr(draft, "cuda_graph_runner", None))
        phases["draft_extend"] = graph_runner(extend)
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


def needed(need: tuple[str, ...], extend_backend: Any) -> tuple[tuple[str, ...], str | None]:
    """The phases a NEXTN profile's graphs line requires on the running draft-extend backend,
    and the note that states a phase SGLang cannot capture there."""
    if "draft_extend" not in need or extend_backend not in EAGER_DRAFT_EXTEND:
        return need, None
    note = (
        f"draft_extend: eager, as in the recipe (SGLang 0.5.23 captures no draft-extend graph "
        f"on {extend_backend})"
    )
    return tuple(p for p in need if p != "draft_extend"), note


def held(phases: Any, need: tuple[str, ...]) -> tuple[bool, str] | None:
    """Whether every phase in `need` holds graphs, and the evidence; None when `phases` is a
    list of names (an older engine's facts, which cannot tell captured from not)."""
    if not isinstance(phases, Mapping):
        return None
    missing = [p for p in need if not phases.get(p, {}).get("captured")]
    shown = [
        f"{p} {phases[p]['graphs']} graph(s) at batch {phases[p]['capture_bs']}"
        for p in need
        if p not in missing
    ]
    parts = [f"captured: {', '.join(shown) or 'none'}"]
    if missing:
        absent = ", ".join(f"{p} (runner {phases.get(p, {}).get('runner')})" for p in missing)
        parts.append(f"not captured: {absent}")
    prefill = phases.get("prefill", {})
    parts.append(
        "prefill: captured"
        if prefill.get("captured")
        else f"prefill: off ({RECIPE_PREFILL}, as the recipe sets)"
    )
    return not missing, "; ".join(parts)


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Every phase the profile runs holds its graphs (DSpark's from the DSpark fact)."""
    if profile.has("dspark"):
        return (_dspark(facts),)
    if err := error(facts, "cuda_graphs"):
        return (judged(LINE, False, err),)
    fact = facts["cuda_graphs"]
    need, note = needed(
        NEXTN_PHASES if profile.has("nextn") else PLAIN_PHASES, fact.get("draft_extend_backend")
    )
    found = held(fact["phases"], need)
    if found is None:
        evidence = "the cuda_graphs facts name phases without what their runners captured"
        return (failed(LINE, evidence, LACKING_FIX),)
    ok, evidence = found
    return (judged(LINE, ok, f"{evidence}; {note}" if note else evidence),)


def _dspark(facts: Facts) -> ProofLine:
    """The target's verify graph and the DSpark draft's decode graph were captured."""
    dspark = fact(facts, "dspark", "no DSpark worker")
    if isinstance(dspark, str):
        return judged(DSPARK_LINE, False, dspark)
    runners = dspark["graph_runners"]
    if not all(isinstance(runners.get(name), Mapping) for name in DSPARK_RUNNERS):
        evidence = "the dspark facts name graph runners without what they captured"
        return failed(DSPARK_LINE, evidence, LACKING_FIX)
    missing = [name for name in DSPARK_RUNNERS if not runners[name]["captured"]]
    shown = ", ".join(
        f"{n} {runners[n]['graphs']} graph(s) at batch {runners[n]['capture_bs']}"
        for n in DSPARK_RUNNERS
        if n not in missing
    )
    absent = ", ".join(f"{n} (runner {runners[n]['runner']})" for n in missing)
    evidence = f"captured: {shown or 'none'}" + (f"; not captured: {absent}" if missing else "")
    return judged(DSPARK_LINE, not missing, evidence)


def follow_graphs(lines: list[ProofLine]) -> list[ProofLine]:
    """With a graphs line failed on a phase not captured, the failed lines that count what
    ran in capture point at it as their cause instead of their own fix."""
    if not any(
        line.key in (LINE.key, DSPARK_LINE.key)
        and line.verdict is Verdict.FAIL
        and "not captured:" in line.evidence
        for line in lines
    ):
        return lines
    return [
        replace(line, fix=NO_GRAPHS_FIX)
        if line.key in CAPTURE_LINES and line.verdict is Verdict.FAIL
        else line
        for line in lines
    ]


LEVER = Lever(
    name="cuda_graphs",
    called="the CUDA graphs lever (decode, verify and draft graphs)",
    called_off="eager decoding",
    lines=(LINE, DSPARK_LINE),
    args=no_args,
    args_why="none of its own: the recipe's graph settings are every profile's "
    "(engine/config.py's SERVER_ARGS)",
    free=frozenset(),
    refuse=refuse,
    refuse_env=refuse_env,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(
        why="SGLang 0.5.23 captures no CUDA graph on torch_native or flex_attention, and builds "
        "this model's MLA attention on no other backend",
        settings=attention(GRAPH_ATTENTION),
    ),
    patch=None,
    facts={"cuda_graphs": graphs},
    reads=("cuda_graphs", "dspark"),
    judge=judge,
    bytes=ByteTerm(why="graphs replay the same kernels: they change the host's time, not bytes"),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
