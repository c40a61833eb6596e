"""SGLang's `meta_info` (the dict on every chunk of `Engine.async_generate`) read into records."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.reply_usage import ReplyUsage


def usage_from_meta_info(meta_info: Mapping[str, Any]) -> ReplyUsage:
    """The reply's usage from SGLang's final meta_info (`spec_*` keys only appear there)."""
    histogram = meta_info.get("spec_correct_drafts_histogram")
    cached = meta_info.get("cached_tokens")
    return ReplyUsage(
        completion_tokens=int(meta_info.get("completion_tokens") or 0),
        prompt_tokens=int(meta_info.get("prompt_tokens") or 0),
        cached_tokens=int(cached) if cached is not None else None,
        verify_rounds=int(meta_info.get("spec_verify_ct") or 0),
        correct_drafts=int(meta_info.get("spec_num_correct_drafts") or 0),
        proposed_drafts=int(meta_info.get("spec_num_proposed_drafts") or 0),
        accept_histogram=tuple(int(n) for n in histogram) if histogram else None,
    )


def finish_type(meta_info: Mapping[str, Any]) -> str | None:
    """`stop`, `length` or `abort` from the finish reason (a dict); None while the reply runs."""
    reason = meta_info.get("finish_reason")
    if isinstance(reason, Mapping):
        reason = reason.get("type")
    return str(reason) if reason is not None else None


def chunk_tokens(chunk: Mapping[str, Any]) -> int:
    """Tokens generated so far, from one chunk of SGLang's stream."""
    return int(chunk.get("meta_info", {}).get("completion_tokens") or 0)


def chunk_ending(chunk: Mapping[str, Any]) -> tuple[ReplyUsage, str | None]:
    """The usage and finish reason of SGLang's last chunk."""
    meta_info = chunk.get("meta_info", {})
    return usage_from_meta_info(meta_info), finish_type(meta_info)
