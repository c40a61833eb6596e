"""The hot-vocabulary draft head's line, judged on facts collected over doubles: it passes
when the live draft reads the hot FP8 slice of the target's head and the verify the full
head, and fails on every sign that the draft reads the full head, reads a head that is not
the target's rows, or maps nothing back."""

from __future__ import annotations

from typing import Any

import pytest

from app.backend.engine.patches import evidence
from app.core.proof_report import Verdict
from app.levers.draft import hot_vocab
from app.levers.lever import Context
from app.levers.model.fp8_head import METHOD as FULL_METHOD
from app.levers.profiles import PROFILES
from app.levers.refusals import refusal
from tests.fixtures.sglang_objects import (
    HotPatchDouble,
    SourcesDouble,
    TensorDouble,
    host_patches,
    hot_vocab_facts,
    route_logits,
    stack_facts,
    stack_scheduler,
)
from tests.support.proof import judge

PROFILE = "stack+hot-vocab"
FULL = [2560, 157184]


def _line(facts: dict[str, Any], profile: str = PROFILE) -> Any:
    found = [x for x in judge(facts, accept=3.9, profile=profile).lines if x.key == "hot_vocab"]
    return found[0] if found else None


def _hot(facts: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**facts, "hot_vocab": {**facts["hot_vocab"], **changes}}


def test_the_line_passes_on_a_healthy_hot_head_naming_its_rows_bytes_and_the_verify_s_head():
    line = _line(hot_vocab_facts())
    assert line.verdict is Verdict.PASS, line
    assert "the draft's logits read float8_e4m3fn [2560, 32768] via LingHotFp8HeadMethod" in (
        line.evidence
    )
    assert "32,768 of 157,184 rows sliced from the target's head" in line.evidence
    assert "84 MB instead of 403 MB a step" in line.evidence
    assert "the draft worker maps 32768 ids back" in line.evidence
    assert "the verify reads float8_e4m3fn [2560, 157184] via LingFp8LMHeadMethod" in line.evidence


def test_the_draft_keeps_the_target_s_whole_module_so_the_nextn_lines_pass_too():
    report = judge(hot_vocab_facts(), accept=3.9, profile=PROFILE)
    assert report.ok, report.failed
    assert {"shared_head", "nextn", "fp8_head", "hot_vocab"} <= {x.key for x in report.lines}


def _full_on_draft(facts: dict[str, Any]) -> dict[str, Any]:
    draft = {"quant_method": FULL_METHOD, "weight_dtype": "float8_e4m3fn"}
    return _hot(facts, draft_head={**draft, "weight_shape": FULL}, weight_shape=FULL, rows=157184)


BROKEN = {
    "the draft reads the full head": _full_on_draft,
    "the draft's logits are not routed to the hot head": lambda f: _hot(
        f, logits_path_reads_hot=False
    ),
    "no hot head on the draft worker": lambda f: _hot(f, draft_head=None),
    "a BF16 hot head (SGLang's own token map)": lambda f: _hot(
        f,
        draft_head={
            "quant_method": "UnquantizedEmbeddingMethod",
            "weight_dtype": "bfloat16",
            "weight_shape": [2560, hot_vocab.ROWS],
        },
    ),
    "its bytes are not the target's rows": lambda f: _hot(f, rows_equal=False),
    "its scales are not the target's": lambda f: _hot(f, scales_equal=False),
    "it is the target's storage": lambda f: _hot(f, distinct_storage=False),
    "nothing maps the ids back": lambda f: _hot(f, worker_ids=None),
    "the worker maps another table": lambda f: _hot(f, worker_ids_are_head_ids=False),
    "it never ran in the draft's graphs": lambda f: _hot(f, captured_calls=0),
    "its logits disagree with the full head's": lambda f: _hot(f, selftest_cosine=0.9),
    "its top-1 maps back wrong": lambda f: _hot(f, selftest_top1=0.5),
    "the verify reads a hot head": lambda f: {
        **f,
        "head_target": {**f["head_target"], "weight_shape": [2560, hot_vocab.ROWS]},
    },
    "the verify's head is BF16": lambda f: {
        **f,
        "head_target": {
            **f["head_target"],
            "weight_dtype": "bfloat16",
            "quant_method": "UnquantizedEmbeddingMethod",
        },
    },
    "another number of rows": lambda f: _hot(f, rows=16384),
    "no hot head was built": lambda f: _hot(f, installed=False),
    "its facts could not be read": lambda f: {**f, "hot_vocab": {"error": "RuntimeError: x"}},
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_each_breakage_fails_the_line_with_its_fix(name: str):
    line = _line(BROKEN[name](hot_vocab_facts()))
    assert line.verdict is Verdict.FAIL and line.fix, (name, line)


def test_facts_of_an_older_engine_fail_the_line_naming_what_they_lack():
    facts = hot_vocab_facts()
    facts["hot_vocab"] = {k: v for k, v in facts["hot_vocab"].items() if k != "selftest_top1"}
    line = _line(facts)
    assert line.verdict is Verdict.FAIL and "lack selftest_top1" in line.evidence


def _collected(*, routed: bool = True, equal: bool = True) -> dict[str, Any]:
    """`evidence.collect` over a stack whose draft worker holds a hot head: the draft's
    logits routed to it or to another head, its rows found equal to the target's or not."""
    scheduler = stack_scheduler()
    worker = scheduler.draft_worker.draft_worker
    head = type("Module", (), {})()
    head.quant_method = type(hot_vocab.METHOD, (), {})()
    head.weight = TensorDouble("torch.float8_e4m3fn", (2560, hot_vocab.ROWS))
    head.hot_ids = worker.hot_token_id = TensorDouble("torch.int64", (hot_vocab.ROWS,))
    setattr(worker, hot_vocab.HEAD_ATTR, head)
    route_logits(worker.draft_runner.model.logits_processor, head if routed else object())
    host = {**host_patches(), "hot_vocab": HotPatchDouble(equal=equal)}
    return evidence.collect(scheduler, SourcesDouble(host=host))


def test_a_live_hot_head_collected_whole_passes():
    assert _line(_collected()).verdict is Verdict.PASS


def test_a_live_hot_head_that_no_longer_holds_the_target_s_rows_fails_the_line():
    facts = _collected(equal=False)
    assert facts["hot_vocab"]["rows_equal"] is False
    assert _line(facts).verdict is Verdict.FAIL


def test_a_hot_head_left_on_the_worker_but_not_on_the_draft_s_logits_path_fails_the_line():
    facts = _collected(routed=False)
    assert facts["hot_vocab"]["logits_path_reads_hot"] is False
    line = _line(facts)
    assert line.verdict is Verdict.FAIL and "(routed: False)" in line.evidence


def test_the_stack_s_draft_reads_no_hot_head_and_has_no_hot_line():
    facts = stack_facts()
    hot = facts["hot_vocab"]
    assert hot["installed"] is False and hot["draft_head"] is None
    assert hot["logits_path_reads_hot"] is False and hot["worker_ids"] is None
    assert _line(facts, "stack") is None
    assert _line(facts).verdict is Verdict.FAIL  # the same facts, judged as stack+hot-vocab


@pytest.mark.parametrize("profile", [p for p in PROFILES if p != PROFILE])
def test_no_other_profile_has_the_lever(profile: str):
    assert not PROFILES[profile].has(hot_vocab.LEVER)


def test_the_lever_needs_nextn_and_the_fp8_head():
    from app.levers.model import fp8_head, humming
    from app.levers.profiles import profile

    with pytest.raises(ValueError, match="needs both"):
        profile("x", humming.LEVER, fp8_head.LEVER, hot_vocab.LEVER)


@pytest.mark.parametrize(
    ("name", "key", "value", "named"),
    [
        (PROFILE, "speculative_token_map", "/m/hot.pt", hot_vocab.LEVER.called),
        ("stack", "speculative_token_map", "/m/hot.pt", hot_vocab.LEVER.called_off),
        (PROFILE, "speculative_use_rejection_sampling", True, hot_vocab.LEVER.called),
    ],
)
def test_sglang_s_own_token_map_and_rejection_sampling_are_refused(name, key, value, named):
    levers = PROFILES[name]
    context = Context("/m", "/d", levers.window)
    line = refusal(levers, context, {key: value}, {})
    assert line is not None and named in line and key in line


def test_rejection_sampling_on_the_stack_is_not_the_lever_s_to_refuse():
    assert hot_vocab.refuse("speculative_use_rejection_sampling", True, PROFILES["stack"]) is None
    assert hot_vocab.refuse("speculative_token_map", None, PROFILES["stack"]) is None
