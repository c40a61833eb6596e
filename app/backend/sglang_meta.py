"""SGLang's `meta_info` (the dict on every chunk of `Engine.async_generate`) read into records.

SGLang's names of the speculative counters are stated here once; `wire` reads the same keys
from a server's `sglext.spec_tokens_details`. Past these two readers every record names them
as `ReplyUsage` does (`verify_rounds`, `correct_drafts`, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from app.core.reply_usage import ReplyUsage, count_in, histogram_in, optional_count_in

SGLANG_VERIFY_ROUNDS: Final = "spec_verify_ct"
SGLANG_CORRECT_DRAFTS: Final = "spec_num_correct_drafts"
SGLANG_PROPOSED_DRAFTS: Final = "spec_num_proposed_drafts"
SGLANG_ACCEPT_HISTOGRAM: Final = "spec_correct_drafts_histogram"


def usage_from_meta_info(meta_info: Mapping[str, Any]) -> ReplyUsage:
    """The reply's usage from SGLang's final meta_info (`spec_*` keys only appear there)."""
    return ReplyUsage(
        completion_tokens=count_in(meta_info, "completion_tokens"),
        prompt_tokens=count_in(meta_info, "prompt_tokens"),
        cached_tokens=optional_count_in(meta_info, "cached_tokens"),
        verify_rounds=count_in(meta_info, SGLANG_VERIFY_ROUNDS, "verify_rounds"),
        correct_drafts=count_in(meta_info, SGLANG_CORRECT_DRAFTS, "correct_drafts"),
        proposed_drafts=count_in(meta_info, SGLANG_PROPOSED_DRAFTS, "proposed_drafts"),
        accept_histogram=histogram_in(meta_info, SGLANG_ACCEPT_HISTOGRAM),
    )


def finish_type(meta_info: Mapping[str, Any]) -> str | None:
    """`stop`, `length` or `abort` from the finish reason (a dict); None while the reply runs."""
    reason = meta_info.get("finish_reason")
    if isinstance(reason, Mapping):
        reason = reason.get("type")
    return str(reason) if reason is not None else None


def chunk_tokens(chunk: Mapping[str, Any]) -> int:
    """Tokens generated so far, from one chunk of SGLang's stream."""
    return count_in(chunk.get("meta_info", {}), "completion_tokens")


def chunk_ending(chunk: Mapping[str, Any]) -> tuple[ReplyUsage, str | None]:
    """The usage and finish reason of SGLang's last chunk."""
    meta_info = chunk.get("meta_info", {})
    return usage_from_meta_info(meta_info), finish_type(meta_info)
