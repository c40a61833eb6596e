"""The stack's KDA ReplaySSM verify: its server args, its patch plan, and its proof's ring line;
`stack-recurrent`, the same stack with SGLang's recurrent verify."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.backend.engine.config import EngineConfig, GpuFacts, server_args
from app.backend.engine.patches.boundary import PatchPlan
from app.core.proof_report import Verdict
from app.levers.profiles import PROFILES
from tests.fixtures.sglang_objects import stack_facts, stack_recurrent_facts
from tests.support.proof import judge, verdict

H200 = GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True)
PROFILE = "stack"
RECURRENT = "stack-recurrent"
RECURRENT_LINES = [
    "cuda_graphs",
    "humming",
    "fp8_head",
    "fp8_head_speed",
    "fp32_head",
    "shared_head",
    "nextn",
    "gc_frozen",
    "fast_cores",
    "no_faking",
    "accept_length",
]
"""`stack-recurrent`'s proof, line by line; the stack's has its ring's and its commit's lines
after NEXTN's."""


def test_the_stack_asks_sglang_for_replayssm_with_the_shortest_ring_nextn_allows():
    args = server_args(EngineConfig("/m", profile=PROFILE), H200)
    assert (args["enable_linear_replayssm_spec"], args["linear_replayssm_cache_len"]) == (True, 8)
    assert args["speculative_num_draft_tokens"] == 4
    recurrent = server_args(EngineConfig("/m", profile=RECURRENT), H200)
    assert "enable_linear_replayssm_spec" not in recurrent
    assert {k: v for k, v in args.items() if "replayssm" not in k} == recurrent


@pytest.mark.parametrize("profile", list(PROFILES))
def test_the_replayssm_commits_are_counted_where_a_profile_verifies_with_it(profile):
    levers = PROFILES[profile]
    plan = PatchPlan.for_profile(levers, "/tmp/sglang.log")
    assert ("replayssm" in plan.patches) == levers.has("replayssm")
    fed = levers.has("replayssm") and levers.has("nextn")  # NEXTN's verify only
    assert ("host.commit" in plan.patches) == fed
    assert (plan.fp8_head, "dspark" in plan.patches, plan.log_file) == (
        levers.has("fp8_head"),
        levers.has("dspark"),
        "/tmp/sglang.log",
    )


def test_the_healthy_stack_passes_with_the_ring_s_and_the_commit_s_lines_after_nextn_s():
    report = judge(stack_facts(), accept=3.9, profile=PROFILE)
    assert report.ok, [line for line in report.lines if line.verdict is not Verdict.PASS]
    keys = [line.key for line in report.lines]
    assert keys == [*RECURRENT_LINES[:7], "replayssm", "prepared_commit", *RECURRENT_LINES[7:]]
    ring = next(line for line in report.lines if line.key == "replayssm")
    assert "ring 8 allocated: True (needs a power of two >= 8)" in ring.evidence


def test_the_recurrent_proof_has_no_ring_line_and_a_recurrent_verify_fails_the_stack_s():
    report = judge(stack_recurrent_facts(), profile=RECURRENT)
    assert report.ok
    assert [line.key for line in report.lines] == RECURRENT_LINES
    report = judge(stack_recurrent_facts(), profile=PROFILE)  # ReplaySSM off
    assert verdict(report, "replayssm") is Verdict.FAIL
    assert not report.ok


def _with(key: str, value: Any) -> dict[str, Any]:
    facts = copy.deepcopy(stack_facts())
    facts["replayssm"][key] = value
    return facts


BREAKS = {
    "ReplaySSM off": ("spec_enabled", False),
    "no KDA fold at each commit": ("kda_fold", False),
    "a ring of 4, under twice the window": ("ring_len", 4),
    "a ring of 12, not a power of two": ("ring_len", 12),
    "no ring allocated": ("ring_allocated", False),
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_each_replayssm_breakage_fails_the_ring_s_line_with_its_fix(name):
    report = judge(_with(*BREAKS[name]), accept=3.9, profile=PROFILE)
    failed = next(line for line in report.lines if line.key == "replayssm")
    assert failed.verdict is Verdict.FAIL
    assert "8 for NEXTN's 4" in failed.fix
    assert not report.ok


def test_no_speculative_worker_or_an_unreadable_pool_fails_the_ring_s_line():
    facts = stack_facts()
    facts["speculative"] = None
    assert "no speculative worker" in next(
        line.evidence for line in judge(facts, profile=PROFILE).lines if line.key == "replayssm"
    )
    facts = stack_facts()
    facts["replayssm"] = {"error": "AttributeError: no mamba_pool"}
    line = next(line for line in judge(facts, profile=PROFILE).lines if line.key == "replayssm")
    assert line.verdict is Verdict.FAIL
    assert line.evidence == "replayssm: AttributeError: no mamba_pool"
