"""The DSpark proof rules judge the `dspark` facts: each DSpark breakage fails its line."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.core.proof_report import Verdict
from app.levers.model.cuda_graphs import graph_runner
from tests.fixtures.sglang_objects import dspark_facts, graph_runner_double, of_class, stack_facts
from tests.support.proof import judge, verdict

DSPARK_KEYS = ("dspark", "dspark_head", "dspark_block", "replayssm", "dspark_graphs")


def test_healthy_dspark_passes_every_line_with_the_dspark_lines_in_place_of_nextn():
    report = judge(dspark_facts(), accept=5.1, profile="dspark")
    assert report.ok, [line for line in report.lines if line.verdict is not Verdict.PASS]
    keys = [line.key for line in report.lines]
    assert set(DSPARK_KEYS) <= set(keys)
    assert not {"nextn", "shared_head", "cuda_graphs"} & set(keys)
    assert "gamma 8, verify window 9" in next(
        line.evidence for line in report.lines if line.key == "dspark_block"
    )


def _with(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    facts = copy.deepcopy(dspark_facts())
    node = facts
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return facts


BREAKS = {
    "NEXTN's worker instead": (("dspark", "worker"), "EAGLEWorkerV2", "dspark"),
    "another draft class": (("dspark", "draft_class"), "Qwen3DSparkModel", "dspark"),
    "a private copy of the head": (("dspark", "head", "is_target_head"), False, "dspark_head"),
    "own embeddings": (("dspark", "head", "embed_is_target_embed"), False, "dspark_head"),
    "a BF16 view of the FP8 head": (
        ("dspark", "head", "quant_method"),
        "UnquantizedEmbeddingMethod",
        "dspark_head",
    ),
    "the head left BF16": (("dspark", "head", "weight_dtype"), "bfloat16", "dspark_head"),
    "SGLang skips the head's method": (
        ("dspark", "head", "applies_quant_method"),
        False,
        "dspark_head",
    ),
    "a BF16 matmul in the draft's capture": (
        ("dspark", "projections_captured"),
        {"LingFp8LMHeadMethod": 1, "UnquantizedEmbeddingMethod": 1},
        "dspark_head",
    ),
    "no draft projection captured": (("dspark", "projections_captured"), {}, "dspark_head"),
    "the FP8 method never ran in the draft's capture": (
        ("dspark", "fp8_calls_in_draft_capture"),
        0,
        "dspark_head",
    ),
    "block 7": (("dspark", "gamma"), 7, "dspark_block"),
    "window 8": (("dspark", "verify_window"), 8, "dspark_block"),
    "ReplaySSM off": (("replayssm", "spec_enabled"), False, "replayssm"),
    "ReplaySSM without the KDA fold": (("replayssm", "kda_fold"), False, "replayssm"),
    "a ring of 16": (("replayssm", "ring_len"), 16, "replayssm"),
    "a ring of 24": (("replayssm", "ring_len"), 24, "replayssm"),
    "no ring allocated": (("replayssm", "ring_allocated"), False, "replayssm"),
    "draft graph left eager": (
        ("dspark", "graph_runners", "draft_decode"),
        graph_runner(of_class("EagerRunner")),
        "dspark_graphs",
    ),
    "verify runner holds no graph": (
        ("dspark", "graph_runners", "target_verify"),
        graph_runner(graph_runner_double(sizes=())),
        "dspark_graphs",
    ),
    "runners recorded as flags only": (
        ("dspark", "graph_runners"),
        {"target_verify": True, "draft_decode": True},
        "dspark_graphs",
    ),
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_each_dspark_breakage_fails_its_line(name):
    path, value, key = BREAKS[name]
    report = judge(_with(path, value), accept=5.1, profile="dspark")
    assert verdict(report, key) is Verdict.FAIL
    assert not report.ok
    failed = next(line for line in report.lines if line.key == key)
    assert failed.fix


def test_no_dspark_worker_or_an_unreadable_fact_fails_every_dspark_line():
    for value in (None, {"error": "AttributeError: no draft_model"}):
        facts = dspark_facts()
        facts["dspark"] = value
        report = judge(facts, accept=5.1, profile="dspark")
        assert all(verdict(report, key) is Verdict.FAIL for key in DSPARK_KEYS)


def test_the_warm_up_accept_length_floor_holds_for_dspark():
    assert verdict(judge(dspark_facts(), accept=1.1, profile="dspark"), "accept_length") is (
        Verdict.FAIL
    )
    assert verdict(judge(dspark_facts(), accept=None, profile="dspark"), "accept_length") is (
        Verdict.FAIL
    )


def test_the_stack_shares_only_the_ring_s_line_with_dspark():
    report = judge(stack_facts())
    assert report.ok and {line.key for line in report.lines} & set(DSPARK_KEYS) == {"replayssm"}
