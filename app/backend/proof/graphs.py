"""The CUDA graphs proof: each phase's runner in, whether the phases a profile needs hold
graphs out (and the recipe's prefill graphs stated off).

A pure function over the `cuda_graphs` phases that app/backend/engine/patches/graph_runners.py
reads in SGLang's scheduler; app/backend/proof/rules.py judges with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from app.core.proof_report import ProofLine, Verdict

RECIPE_PREFILL = "cuda_graph_backend_prefill=disabled"
GRAPH_LINES = frozenset({"cuda_graphs", "dspark_graphs"})
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


def judge(phases: Any, need: tuple[str, ...]) -> tuple[bool, str] | None:
    """Whether every phase in `need` holds graphs, and the evidence; None when `phases` is a
    list of names (an older engine's facts, which cannot tell captured from not)."""
    if not isinstance(phases, Mapping):
        return None
    missing = [p for p in need if not phases.get(p, {}).get("captured")]
    held = [
        f"{p} {phases[p]['graphs']} graph(s) at batch {phases[p]['capture_bs']}"
        for p in need
        if p not in missing
    ]
    parts = [f"captured: {', '.join(held) or 'none'}"]
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


def follow_graphs(lines: list[ProofLine]) -> list[ProofLine]:
    """With a graphs line failed on a phase not captured, the failed lines that count what
    ran in capture point at it as their cause instead of their own fix."""
    if not any(
        line.key in GRAPH_LINES
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
