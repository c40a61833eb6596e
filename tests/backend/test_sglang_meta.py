"""SGLang's meta_info read into the reply's usage record, and the record's JSON form."""

from __future__ import annotations

import pytest

from app.backend.sglang_meta import chunk_ending, chunk_tokens, usage_from_meta_info
from app.core.reply_usage import ReplyUsage

FINAL_META = {
    # The last meta_info of a 30-token reply on the H200 (assets/ demo trace), trimmed.
    "finish_reason": {"type": "stop", "matched": 1},
    "prompt_tokens": 12,
    "completion_tokens": 30,
    "cached_tokens": 0,
    "e2e_latency": 0.11,
    "spec_accept_rate": 1.0,
    "spec_accept_length": 3.75,
    "spec_num_correct_drafts": 24,
    "spec_num_proposed_drafts": 24,
    "spec_verify_ct": 8,
    "spec_correct_drafts_histogram": [0, 0, 0, 8],
}


def test_the_final_meta_info_becomes_one_usage_record() -> None:
    usage, finish = chunk_ending({"text": "...", "meta_info": FINAL_META})

    assert finish == "stop"
    assert usage == ReplyUsage(
        completion_tokens=30,
        prompt_tokens=12,
        cached_tokens=0,
        verify_rounds=8,
        correct_drafts=24,
        proposed_drafts=24,
        accept_histogram=(0, 0, 0, 8),
    )
    assert usage.accept_length == pytest.approx(FINAL_META["spec_accept_length"])
    assert usage.accept_rate == pytest.approx(FINAL_META["spec_accept_rate"])


def test_a_running_chunk_has_tokens_and_no_finish() -> None:
    chunk = {"text": "Hi", "meta_info": {"completion_tokens": 2, "finish_reason": None}}

    assert chunk_tokens(chunk) == 2
    assert chunk_ending(chunk) == (ReplyUsage(completion_tokens=2), None)


def test_without_speculation_there_is_no_accept_length() -> None:
    usage = usage_from_meta_info({"completion_tokens": 5, "prompt_tokens": 3})

    assert usage.accept_length is None and usage.accept_rate is None
    assert usage.cached_tokens is None and usage.accept_histogram is None


def test_the_record_survives_its_json_form() -> None:
    usage = usage_from_meta_info(FINAL_META)

    assert ReplyUsage.from_dict(usage.to_dict()) == usage
    assert ReplyUsage.from_dict(ReplyUsage().to_dict()) == ReplyUsage()
