"""Every proof line can fail: removing each fact a line reads, from a healthy profile's
recorded facts, fails that line with its fix (and each line of each profile is covered)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.core.proof_report import Verdict
from app.levers.profiles import PROFILES
from tests.fixtures.sglang_objects import (
    bf16_router_facts,
    dspark_facts,
    stack_facts,
    stack_recurrent_facts,
)
from tests.support.proof import judge

EVIDENCE = {
    "cuda_graphs": ("cuda_graphs",),
    "humming": ("moe_target", "humming", "capture_calls"),
    "fp8_head": ("head_target", "fp8_head"),
    "fp8_head_speed": ("fp8_head",),
    "fp32_head": ("head_target",),
    "router": ("router",),
    "shared_head": ("sharing",),
    "nextn": ("speculative",),
    "replayssm": ("replayssm",),
    "prepared_commit": ("prepared_commit", "replayssm", "speculative"),
    "no_faking": ("env",),
    "gc_frozen": ("gc",),
    "fast_cores": ("cores",),
    "dspark": ("dspark",),
    "dspark_head": ("dspark",),
    "dspark_block": ("dspark",),
    "dspark_graphs": ("dspark",),
    "dspark_weights": ("dspark_weights",),
}
"""Each line's evidence: the facts whose absence must fail it (accept_length: below)."""
HEALTHY = {
    "stack": (stack_facts, 3.9),
    "stack-recurrent": (stack_recurrent_facts, 3.9),
    "dspark": (dspark_facts, 5.1),
    "stack+bf16-router": (bf16_router_facts, 3.9),
    "dspark+fp8-draft": (lambda: dspark_facts(fp8_draft=True), 5.1),
}
CASES = [
    (profile, line, key)
    for profile, (facts, accept) in HEALTHY.items()
    for line in [x.key for x in judge(facts(), accept=accept, profile=profile).lines]
    for key in EVIDENCE.get(line, ())
]


def test_every_line_of_every_healthy_profile_has_its_evidence_named():
    for profile, (facts, accept) in HEALTHY.items():
        report = judge(facts(), accept=accept, profile=profile)
        assert report.ok, profile
        assert {line.key for line in report.lines} <= {*EVIDENCE, "accept_length"}


@pytest.mark.parametrize(("profile", "line", "key"), CASES)
def test_removing_a_line_s_evidence_fails_that_line_with_its_fix(profile, line, key):
    facts_of, accept = HEALTHY[profile]
    facts: dict[str, Any] = copy.deepcopy(facts_of())
    del facts[key]
    judged = {x.key: x for x in judge(facts, accept=accept, profile=profile).lines}
    assert judged[line].verdict is Verdict.FAIL, judged[line]
    assert judged[line].fix


@pytest.mark.parametrize("profile", list(HEALTHY))
def test_no_warm_up_accept_length_fails_the_accept_line(profile):
    facts_of, _ = HEALTHY[profile]
    report = judge(facts_of(), accept=None, profile=profile)
    assert [line.key for line in report.failed] == ["accept_length"]


def test_the_healthy_profiles_cover_every_line_a_profile_can_have():
    covered = {
        line.key
        for profile, (facts, accept) in HEALTHY.items()
        for line in judge(facts(), accept=accept, profile=profile).lines
    }
    assert covered == {*EVIDENCE, "accept_length"}
    assert set(HEALTHY) <= set(PROFILES)
