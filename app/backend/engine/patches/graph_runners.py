"""What SGLang's CUDA-graph runners hold, read from the runner objects themselves.

SGLang 0.5.23's `graph_memory_usage` lists all six phases whether or not they were
captured, so the proof reads each phase's runner instead: a phase is captured only when
its runner is a graph runner (not missing, not the eager runner put in its place) holding
at least one graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


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
