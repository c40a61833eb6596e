"""The opt-in levers' lines judge the live model: the BF16 router from the gates' dtypes,
the FP8 DSpark draft from its layer linears; each fails when its fact is wrong, and only the
profile with the lever has its line (the other profiles' lines are those run on the GPU)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.core.proof_report import Verdict
from tests.fixtures.sglang_objects import (
    bf16_router_facts,
    dspark_facts,
    dspark_weights,
    stack_facts,
)
from tests.support.proof import judge, verdict


def _line(facts: dict[str, Any], profile: str, key: str, accept: float = 3.9) -> Any:
    return next(line for line in judge(facts, accept, profile).lines if line.key == key)


def test_the_bf16_router_passes_on_its_profile_naming_the_gates_and_their_bytes():
    line = _line(bf16_router_facts(), "stack+bf16-router", "router")
    assert line.verdict is Verdict.PASS, line
    assert line.title == "BF16 router gates (opt-in)"
    assert "6 router gates (5 target, 1 draft): bfloat16 6, 15.7 MB" in line.evidence
    assert "router_dtype 'bf16'" in line.evidence


@pytest.mark.parametrize("profile", ["stack", "stack-recurrent", "humming+fp8", "baseline"])
def test_a_profile_without_the_lever_has_no_router_line(profile):
    facts = stack_facts(ring=None if profile == "stack-recurrent" else 8)
    assert "router" not in [line.key for line in judge(facts, 3.9, profile).lines]


def _gates(facts: dict[str, Any], model: str, dtypes: dict[str, int]) -> dict[str, Any]:
    changed = copy.deepcopy(facts)
    changed["router"][model]["dtypes"] = dtypes
    return changed


ROUTER_BREAKS = {
    "FP32 gates on the BF16 profile": (
        _gates(bf16_router_facts(), "target", {"float32": 5}),
        "stack+bf16-router",
    ),
    "one FP32 gate among BF16 ones": (
        _gates(bf16_router_facts(), "target", {"bfloat16": 4, "float32": 1}),
        "stack+bf16-router",
    ),
    "the NEXTN draft's gate left FP32": (
        _gates(bf16_router_facts(), "draft", {"float32": 1}),
        "stack+bf16-router",
    ),
    "no gate found": (
        _gates(_gates(bf16_router_facts(), "target", {}), "draft", {}),
        "stack+bf16-router",
    ),
    "unreadable": (
        {**bf16_router_facts(), "router": {"error": "AttributeError: weight"}},
        "stack+bf16-router",
    ),
}


@pytest.mark.parametrize("name", list(ROUTER_BREAKS))
def test_each_router_breakage_fails_the_router_line_with_its_fix(name):
    facts, profile = ROUTER_BREAKS[name]
    line = _line(facts, profile, "router")
    assert line.verdict is Verdict.FAIL, line
    assert line.fix


def test_the_fp8_draft_passes_on_its_profile_naming_its_linears_and_bytes():
    facts = dspark_facts(fp8_draft=True)
    report = judge(facts, 5.1, "dspark+fp8-draft")
    assert report.ok, report.failed
    line = _line(facts, "dspark+fp8-draft", "dspark_weights", 5.1)
    assert line.title == "DSpark draft layers in FP8 (opt-in)"
    assert line.evidence.startswith("20 layer linears: Fp8LinearMethod 20 (float8_e4m3fn 20)")
    assert "float8_e4m3fn 0.50 GB" in line.evidence


def test_dspark_has_no_fp8_draft_line():
    assert "dspark_weights" not in [line.key for line in judge(dspark_facts(), 5.1, "dspark").lines]


def _weights(fp8: bool, **changes: Any) -> dict[str, Any]:
    facts = dspark_facts(fp8_draft=fp8)
    facts["dspark_weights"] = {**dspark_weights(fp8), **changes}
    return facts


DRAFT_BREAKS = {
    "FP8 weights under another method": (
        _weights(True, layer_linears={"UnquantizedLinearMethod": 20}),
        "dspark+fp8-draft",
    ),
    "the draft left BF16": (_weights(False), "dspark+fp8-draft"),
    "one linear left BF16": (
        _weights(
            True,
            layer_linears={"Fp8LinearMethod": 19, "UnquantizedLinearMethod": 1},
            layer_linear_dtypes={"float8_e4m3fn": 19, "bfloat16": 1},
        ),
        "dspark+fp8-draft",
    ),
    "FP8 method over BF16 weights": (
        _weights(True, layer_linear_dtypes={"bfloat16": 20}),
        "dspark+fp8-draft",
    ),
    "no linear found": (
        _weights(True, layer_linears={}, layer_linear_dtypes={}),
        "dspark+fp8-draft",
    ),
}


@pytest.mark.parametrize("name", list(DRAFT_BREAKS))
def test_each_draft_breakage_fails_the_fp8_draft_line_with_its_fix(name):
    facts, profile = DRAFT_BREAKS[name]
    line = _line(facts, profile, "dspark_weights", 5.1)
    assert line.verdict is Verdict.FAIL, line
    assert line.fix


def test_dspark_facts_without_the_draft_s_weights_fail_the_line_as_an_older_engine_s():
    facts = dspark_facts(fp8_draft=True)
    del facts["dspark_weights"]
    line = _line(facts, "dspark+fp8-draft", "dspark_weights", 5.1)
    assert line.verdict is Verdict.FAIL and "older ling-chat engine" in line.fix
    assert verdict(judge(facts, 5.1, "dspark+fp8-draft"), "dspark") is Verdict.PASS


def test_draft_weights_that_could_not_be_read_fail_their_line_only():
    facts = dspark_facts(fp8_draft=True)
    facts["dspark_weights"] = {"error": "AttributeError: embed_tokens"}
    line = _line(facts, "dspark+fp8-draft", "dspark_weights", 5.1)
    assert line.verdict is Verdict.FAIL and "AttributeError: embed_tokens" in line.evidence
    assert verdict(judge(facts, 5.1, "dspark+fp8-draft"), "dspark") is Verdict.PASS
