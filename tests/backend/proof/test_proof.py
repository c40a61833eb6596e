"""The proof rules judge evidence, never arguments: each broken fact fails its line."""

from __future__ import annotations

import copy
import json

import pytest

from app.backend.engine.patches.evidence import collect
from app.backend.proof import refusal_report
from app.backend.replay import trace_path
from app.core.proof_report import ProofReport, Verdict
from tests.fixtures.sglang_objects import SourcesDouble, plain_scheduler, stack_facts
from tests.support.proof import judge, verdict


def test_healthy_stack_passes_every_line():
    report = judge(stack_facts())
    assert report.ok
    assert {line.verdict for line in report.lines} == {Verdict.PASS}
    assert "W4A16" in next(line.evidence for line in report.lines if line.key == "humming")


NOT_CAPTURED = {"runner": None, "captured": False, "graphs": 0, "capture_bs": []}
BREAKS = {
    "draft MoE on Triton": (
        "moe_draft",
        [
            {
                **layer,
                "quant_method": "UnquantizedFusedMoEMethod",
                "runner_core": "TritonRunnerCore",
            }
            for layer in stack_facts()["moe_draft"]
        ],
        "humming",
    ),
    "Humming never ran in capture": ("capture_calls", {}, "humming"),
    "head left BF16": (
        "head_target",
        {**stack_facts()["head_target"], "weight_dtype": "bfloat16"},
        "fp8_head",
    ),
    "head never captured": (
        "fp8_head",
        {**stack_facts()["fp8_head"], "captured_calls": 0, "captured_by_kernel": {}},
        "fp8_head",
    ),
    "chosen head kernel never captured": (
        "fp8_head",
        {**stack_facts()["fp8_head"], "captured_by_kernel": {"cutlass": 5}},
        "fp8_head",
    ),
    "head's long-input kernel numerically wrong": (
        "fp8_head",
        {**stack_facts()["fp8_head"], "fallback_cosine_min": 0.3},
        "fp8_head",
    ),
    "head numerically wrong": (
        "fp8_head",
        {**stack_facts()["fp8_head"], "cosine_min": 0.5},
        "fp8_head",
    ),
    "head slower than BF16": (
        "fp8_head",
        {**stack_facts()["fp8_head"], "speedup": {"1": 1.9, "4": 0.9}},
        "fp8_head_speed",
    ),
    "FP32 logits on": (
        "head_target",
        {**stack_facts()["head_target"], "fp32_logits": True},
        "fp32_head",
    ),
    "draft head is its own": (
        "sharing",
        {"head_module_shared": False, "head_weight_shared": True, "embed_shared": True},
        "shared_head",
    ),
    "NEXTN off": ("speculative", None, "nextn"),
    "NEXTN 5 steps": (
        "speculative",
        {**stack_facts()["speculative"], "num_steps": 5},
        "nextn",
    ),
    "draft-extend graph missing": (
        "cuda_graphs",
        {"phases": {**stack_facts()["cuda_graphs"]["phases"], "draft_extend": NOT_CAPTURED}},
        "cuda_graphs",
    ),
    "faked accept length": ("env", {"SGLANG_SIMULATE_ACC_LEN": "3.5"}, "no_faking"),
    "collection failed": ("humming", {"error": "AttributeError: boom"}, "humming"),
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_each_broken_fact_fails_its_line(name):
    key, value, line = BREAKS[name]
    facts = copy.deepcopy(stack_facts())
    facts[key] = value
    report = judge(facts)
    assert not report.ok
    assert verdict(report, line) is Verdict.FAIL
    failed = next(x for x in report.lines if x.key == line)
    assert failed.fix


def test_collapsed_or_missing_accept_length_fails():
    assert verdict(judge(stack_facts(), accept=1.01), "accept_length") is Verdict.FAIL
    assert verdict(judge(stack_facts(), accept=None), "accept_length") is Verdict.FAIL


def test_a_missing_fp8_head_fails_both_lines_and_the_speed_fix_points_at_it():
    facts = stack_facts()
    facts["fp8_head"] = {"installed": False}
    report = judge(facts)
    lines = {line.key: line for line in report.lines}
    assert lines["fp8_head"].verdict is Verdict.FAIL
    assert lines["fp8_head_speed"].verdict is Verdict.FAIL
    assert "FP8 LM head line" in lines["fp8_head_speed"].fix


def test_levers_off_by_request_are_verified_off():
    facts = stack_facts()
    facts.update(moe_draft=None, head_draft=None, sharing=None, speculative=None)
    facts["cuda_graphs"] = collect(plain_scheduler(), SourcesDouble())["cuda_graphs"]
    facts["fp8_head"] = {"installed": False}
    facts["head_target"] = {
        **facts["head_target"],
        "weight_dtype": "bfloat16",
        "quant_method": "UnquantizedEmbeddingMethod",
        "fp32_logits": True,
    }
    report = judge(facts, accept=None, profile="humming")
    assert report.ok
    assert verdict(report, "fp8_head") is Verdict.OFF
    assert verdict(report, "nextn") is Verdict.OFF


def test_the_recipes_fp32_logits_must_really_be_on():
    facts = stack_facts()
    facts.update(moe_draft=None, head_draft=None, sharing=None, speculative=None)
    facts["fp8_head"] = {"installed": False}
    facts["head_target"] = {**facts["head_target"], "weight_dtype": "bfloat16"}
    report = judge(facts, accept=None, profile="humming")
    assert verdict(report, "fp32_head") is Verdict.FAIL


def test_a_lever_off_by_request_but_engaged_fails():
    report = judge(stack_facts(), profile="humming+nextn")
    assert verdict(report, "fp8_head") is Verdict.FAIL
    assert "off by request but engaged" in next(
        line.evidence for line in report.lines if line.key == "fp8_head"
    )


def test_refusal_report_fails_with_the_engine_message():
    report = refusal_report("stack", "shared_head", "the draft's head is its own module")
    assert not report.ok
    assert report.lines[0].title == "Draft shares the target's LM head module"
    assert report.lines[0].fix


def test_report_round_trips_through_json():
    report = judge(stack_facts())
    again = ProofReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again == report


def test_the_speed_line_names_the_chosen_kernel_its_floor_share_and_the_losers():
    report = judge(stack_facts())
    speed = next(line.evidence for line in report.lines if line.key == "fp8_head_speed")
    assert speed.startswith("triton-fp8dot[128x128w4s4]: M=1: BF16 190.0 us vs FP8 100.0 us")
    assert "94% of the floor" in speed and "4300 GB/s" in speed
    assert "cutlass 150/152 us" in speed
    assert "scaled-mm failed (RuntimeError: no rowwise scaling)" in speed
    head = next(line.evidence for line in report.lines if line.key == "fp8_head")
    assert "kernel triton-fp8dot[128x128w4s4] ran 4x in graph capture" in head


OLD_FP8_FACTS = ("kernel", "captured_by_kernel", "fallback_cosine_min", "candidates_us")


def test_fp8_facts_recorded_before_the_kernel_choice_fail_both_lines_naming_what_they_lack():
    facts = stack_facts()
    facts["fp8_head"] = {
        k: v for k, v in facts["fp8_head"].items() if k not in OLD_FP8_FACTS + ("floor_share",)
    }
    lines = {line.key: line for line in judge(facts).lines}
    head, speed = lines["fp8_head"], lines["fp8_head_speed"]
    assert head.verdict is Verdict.FAIL and speed.verdict is Verdict.FAIL
    assert head.evidence == (
        "the fp8_head facts lack kernel, captured_by_kernel, fallback_cosine_min"
    )
    assert speed.evidence == "the fp8_head facts lack kernel, floor_share, candidates_us"
    assert head.fix and speed.fix and "older" in speed.fix


def test_the_shipped_h200_trace_is_judged_today_as_it_was_recorded():
    """The demo trace's facts (the stack on the H200, its graph runners' captures included),
    judged by today's rules, give every recorded line back, each a pass."""
    trace = json.loads(trace_path("demo").read_text(encoding="utf-8"))
    facts = dict(trace["proof"]["facts"])
    accept = facts.pop("warmup_accept_length")
    report = judge(facts, accept=accept, profile=trace["proof"]["profile"])
    recorded = {
        line["key"]: (line["verdict"], line["evidence"]) for line in trace["proof"]["lines"]
    }
    judged = {line.key: (line.verdict.value, line.evidence) for line in report.lines}
    # lines added after the recording fail on the facts it lacks, naming the older engine
    added = {key: judged.pop(key) for key in set(judged) - set(recorded)}
    assert judged == recorded
    assert set(added) == {"prepared_commit", "gc_frozen", "fast_cores"}
    assert all(verdict == "fail" and "not reported" in why for verdict, why in added.values())
    assert "cuda_graphs" in judged and "prefill: off" in judged["cuda_graphs"][1]
    assert all(verdict == "pass" for verdict, _ in recorded.values())
