"""The CUDA graphs line judges what each phase's runner captured, never SGLang's phase list."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.backend.engine.patches.evidence import collect
from app.core.proof_report import Verdict
from tests.fixtures.sglang_objects import (
    SourcesDouble,
    graph_runner_double,
    of_class,
    plain_scheduler,
    stack_facts,
    stack_scheduler,
)
from tests.support.proof import judge, verdict


def graphs_line(facts: dict[str, Any], profile: str = "stack") -> Any:
    return next(line for line in judge(facts, profile=profile).lines if line.key == "cuda_graphs")


def test_the_stack_s_line_names_each_phase_s_graphs_and_states_prefill_off():
    line = graphs_line(stack_facts())
    assert line.verdict is Verdict.PASS
    assert line.evidence == (
        "captured: target_verify 1 graph(s) at batch [1], draft_decode 1 graph(s) at batch [1], "
        "draft_extend 1 graph(s) at batch [1]; prefill: off "
        "(cuda_graph_backend_prefill=disabled, as the recipe sets)"
    )


@pytest.mark.parametrize("phase", ["target_verify", "draft_decode", "draft_extend"])
def test_each_phase_the_stack_needs_fails_the_line_when_its_runner_holds_no_graph(phase):
    scheduler = stack_scheduler()
    runner = scheduler.tp_worker.model_runner
    draft = scheduler.draft_worker.draft_worker
    if phase == "target_verify":
        runner.decode_cuda_graph_runner = runner.eager_runner  # SGLang's place-holder
    elif phase == "draft_decode":
        draft.cuda_graph_runner = None
    else:
        draft.cuda_graph_runner_for_draft_extend = graph_runner_double(sizes=())
    line = graphs_line(collect(scheduler, SourcesDouble()))
    assert line.verdict is Verdict.FAIL
    assert f"not captured: {phase}" in line.evidence
    assert "cuda_graph_backend_decode=disabled" in line.fix


def test_a_plain_profile_needs_its_decode_graph():
    scheduler = plain_scheduler()
    facts = {**stack_facts(), "cuda_graphs": collect(scheduler, SourcesDouble())["cuda_graphs"]}
    facts.update(moe_draft=None, head_draft=None, sharing=None, speculative=None)
    assert graphs_line(facts, "humming+fp8").verdict is Verdict.PASS
    runner = scheduler.tp_worker.model_runner
    runner.decode_cuda_graph_runner = None
    facts["cuda_graphs"] = collect(scheduler, SourcesDouble())["cuda_graphs"]
    line = graphs_line(facts, "humming+fp8")
    assert line.verdict is Verdict.FAIL
    assert line.evidence.startswith("captured: none; not captured: decode (runner None)")


def test_graphs_disabled_fail_the_graphs_line_first_though_sglang_lists_every_phase():
    """`cuda_graph_backend_decode=disabled` on the H200: SGLang captured nothing, its memory
    table still named all six phases, and nothing ran in capture."""
    scheduler = stack_scheduler()
    runner = scheduler.tp_worker.model_runner
    runner.decode_cuda_graph_runner = runner.eager_runner
    draft = scheduler.draft_worker.draft_worker
    draft.cuda_graph_runner = draft.cuda_graph_runner_for_draft_extend = None
    sources = SourcesDouble()
    sources.captured = {}
    facts = collect(scheduler, sources)
    facts["fp8_head"] = {**facts["fp8_head"], "captured_calls": 0, "captured_by_kernel": {}}
    assert len(facts["cuda_graphs"]["memory_gb"]) == 6
    report = judge(facts)
    assert report.failed[0].key == "cuda_graphs"
    assert report.failed[0].evidence.startswith("captured: none; not captured: target_verify")
    assert [line.key for line in report.failed] == ["cuda_graphs", "humming", "fp8_head"]
    assert all(line.fix.startswith("see the CUDA graphs line") for line in report.failed[1:])


def test_with_graphs_captured_a_capture_line_keeps_its_own_fix():
    facts = {**stack_facts(), "capture_calls": {}}
    (failed,) = judge(facts).failed
    assert failed.key == "humming" and failed.fix.startswith("install humming-kernels")


def test_prefill_graphs_captured_are_stated_so():
    facts = copy.deepcopy(stack_facts())
    facts["cuda_graphs"]["phases"]["prefill"] = {
        "runner": "PrefillCudaGraphRunner",
        "captured": True,
        "graphs": 2,
        "capture_bs": [1, 2],
    }
    line = graphs_line(facts)
    assert line.verdict is Verdict.PASS and line.evidence.endswith("prefill: captured")


def test_phase_names_without_their_runners_fail_as_facts_of_an_older_engine():
    facts = {**stack_facts(), "cuda_graphs": {"phases": ["decode", "target_verify"]}}
    line = graphs_line(facts)
    assert line.verdict is Verdict.FAIL
    assert "older ling-chat engine" in line.fix
    assert verdict(judge(facts), "cuda_graphs") is Verdict.FAIL


def test_an_unreadable_graph_fact_fails_the_line():
    facts = {**stack_facts(), "cuda_graphs": {"error": "AttributeError: no runner"}}
    line = graphs_line(facts)
    assert line.verdict is Verdict.FAIL and "AttributeError" in line.evidence


def test_a_prefill_runner_s_token_sizes_count_and_an_eager_runner_holds_no_graph():
    from app.levers.model.cuda_graphs import graph_runner
    from tests.fixtures.sglang_objects import of_class

    backend = of_class("FullCudaGraphBackend", _graphs={1: object(), 2: object()})
    prefill = of_class("PrefillCudaGraphRunner", capture_num_tokens=[512, 256], backend=backend)
    assert graph_runner(prefill) == {
        "runner": "PrefillCudaGraphRunner",
        "captured": True,
        "graphs": 2,
        "capture_bs": [256, 512],
    }
    eager = of_class("EagerRunner")
    assert graph_runner(eager)["captured"] is False  # not in place of one: still no graph
    assert graph_runner(prefill, eager=prefill)["captured"] is False


def test_without_the_dspark_fact_its_head_line_keeps_its_own_fix():
    from tests.fixtures.sglang_objects import dspark_facts

    facts = {**dspark_facts(), "dspark": None}
    head = next(x for x in judge(facts, profile="dspark").lines if x.key == "dspark_head")
    assert head.verdict is Verdict.FAIL and not head.fix.startswith("see the CUDA graphs line")


def test_flashinfer_mla_s_eager_draft_extend_is_stated_not_failed():
    """FlashInfer attention, the Spark's: SGLang 0.5.23 builds no draft-extend graph runner on
    FlashInferMLAAttnBackend (the H200's FlashInfer run held none), as in the recipe's run."""
    scheduler = stack_scheduler()
    draft = scheduler.draft_worker.draft_worker
    draft.draft_extend_attn_backend = of_class("FlashInferMLAAttnBackend")
    draft.cuda_graph_runner_for_draft_extend = None
    line = graphs_line(collect(scheduler, SourcesDouble()))
    assert line.verdict is Verdict.PASS
    assert "draft_extend 1 graph" not in line.evidence
    assert line.evidence.endswith(
        "draft_extend: eager, as in the recipe (SGLang 0.5.23 captures no draft-extend graph "
        "on FlashInferMLAAttnBackend)"
    )


@pytest.mark.parametrize(
    ("backend", "phase"),
    [("TritonAttnBackend", "draft_extend"), ("FlashInferMLAAttnBackend", "draft_decode")],
)
def test_a_phase_sglang_can_capture_still_fails_the_line_when_missing(backend, phase):
    scheduler = stack_scheduler()
    draft = scheduler.draft_worker.draft_worker
    draft.draft_extend_attn_backend = of_class(backend)
    if phase == "draft_decode":
        draft.cuda_graph_runner = None
    draft.cuda_graph_runner_for_draft_extend = None
    line = graphs_line(collect(scheduler, SourcesDouble()))
    assert line.verdict is Verdict.FAIL
    assert f"not captured: {phase}" in line.evidence
