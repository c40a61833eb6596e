"""The trace file of a recorded session, read and checked whole before it plays (`replay`
records and plays it): its format, and reply events to and from its JSON.

A trace is one JSON file (schema `TRACE_FORMAT`, version `TRACE_VERSION`):

    {"format": "ling-chat-trace", "version": 1, "recorded_at": "2025-01-01T00:00:00+00:00",
     "info": {"kind": "engine", "model": ..., "sglang_version": ..., "profile": ...,
              "speculative": true, "context_length": 32768,
              "draft": {"steps": 3, "verify_tokens": 4, "block": null}},
     "stages": [{"name": ..., "done": false, "elapsed_s": 0.0, "detail": ""}, ...],
     "proof": {...ProofReport.to_dict()...} | null,
     "replies": [{"request": {"messages": [{"role": "user", "content": ...}],
                              "sampling": {"temperature": ..., ...},
                              "thinking": {"enabled": true, "budget": 2048},
                              "partial": {"reasoning": ..., "answer": ...}},
                  "events": [{"type": "chunk", "t": 0.21, "answer": ..., "reasoning": ...,
                              "completion_tokens": 3},
                             ...,
                             {"type": "done", "t": 4.2, "finish_reason": "stop",
                              "usage": {...ReplyUsage.to_dict()...}}]}]}

`thinking` and `partial` (a continuation of the reply before it: what it continued) are
absent from older traces; a `done` event of a reply cut by a limit may name it in `cut_by`.

`t` is seconds since the request was sent, never less than the event before; the last
event of a reply, and only it, is a `done` or an `error` (`{"type": "error", "t": ...,
"message": ...}`). Older traces hold SGLang's final
`meta_info` in a `done` event instead of `usage`; it is read into the same record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Final

from app.backend.draft import shape
from app.backend.protocol import (
    BackendInfo,
    LoadStage,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
)
from app.backend.sglang_meta import usage_from_meta_info
from app.core.errors import BackendError
from app.core.proof_report import ProofReport
from app.core.reply_usage import ReplyUsage, check_count

TRACE_FORMAT: Final = "ling-chat-trace"
TRACE_VERSION: Final = 1


def event_to_dict(event: ReplyEvent, started_at: float) -> dict[str, Any]:
    """One reply event as trace JSON, its time made relative to `started_at`."""
    t = round(event.at - started_at, 6)
    if isinstance(event, TextChunk):
        return {
            "type": "chunk",
            "t": t,
            "answer": event.answer,
            "reasoning": event.reasoning,
            "completion_tokens": event.completion_tokens,
        }
    if isinstance(event, ReplyDone):
        done = {
            "type": "done",
            "t": t,
            "finish_reason": event.finish_reason,
            "usage": event.usage.to_dict(),
        }
        return {**done, "cut_by": event.cut_by} if event.cut_by else done
    return {"type": "error", "t": t, "message": event.message}


def event_from_dict(data: Mapping[str, Any], at: float) -> ReplyEvent:
    """Rebuild a reply event from trace JSON, stamped with arrival time `at`."""
    kind = data["type"]
    if kind == "chunk":
        return TextChunk(
            answer=data["answer"],
            reasoning=data["reasoning"],
            completion_tokens=check_count(data["completion_tokens"], "completion_tokens"),
            at=at,
        )
    if kind == "done":
        usage = (
            ReplyUsage.from_dict(data["usage"])
            if "usage" in data
            else usage_from_meta_info(data["meta_info"])
        )
        cut_by = data.get("cut_by", "")
        if not isinstance(cut_by, str):
            raise ValueError(f"cut_by {cut_by!r:.40} is not text")
        return ReplyDone(data["finish_reason"], usage, at, cut_by)
    if kind == "error":
        return ReplyError(message=data["message"], at=at)
    raise ValueError(f"unknown event type {kind!r}")


def info_from_dict(data: Mapping[str, Any]) -> BackendInfo:
    """The recorded backend's facts; a trace recorded before the draft was kept has none."""
    draft = data.get("draft")
    if draft is None:
        return BackendInfo(**data)
    if (recorded := shape(**draft)) is None:
        raise ValueError(f"the draft {draft!r} is not counts of steps and tokens")
    return BackendInfo(**{**data, "draft": recorded})


def read_trace(path: Path) -> dict[str, Any]:
    """Read and check a trace file; problems raise a one-line `BackendError`."""
    try:
        trace = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise BackendError(f"{path}: no such trace file") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BackendError(f"{path}: not a readable trace ({exc})") from exc
    if not isinstance(trace, dict) or trace.get("format") != TRACE_FORMAT:
        raise BackendError(f"{path}: not a ling-chat trace")
    if trace.get("version") != TRACE_VERSION:
        raise BackendError(
            f"{path}: trace version {trace.get('version')!r} is not supported "
            f"(this ling-chat reads version {TRACE_VERSION})"
        )
    try:
        info_from_dict(trace["info"])
        for stage in trace["stages"]:
            LoadStage(**stage)
        if trace["proof"] is not None:
            ProofReport.from_dict(trace["proof"])
        for number, reply in enumerate(trace["replies"], 1):
            _check_events(number, reply["events"])
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise BackendError(f"{path}: malformed trace ({exc!r})") from exc
    return trace


def _check_events(number: int, events: list[Any]) -> None:
    """A recorded reply plays as it was: its times never go back, and its one `done` or
    `error` event is its last (one earlier would end it there, empty, as if complete).

    Raises:
        ValueError: naming the reply (from 1) and the event that breaks this.
    """
    previous = 0.0
    for index, data in enumerate(events):
        at = _seconds(data["t"])
        if at < previous:
            raise ValueError(
                f"reply {number}, event {index + 1}: its time {at:g} s is before the last "
                f"event's {previous:g} s"
            )
        previous = at
        last = index == len(events) - 1
        if isinstance(event_from_dict(data, at), TextChunk) == last:
            raise ValueError(
                f"reply {number}, event {index + 1}: a reply ends with its one done or error event"
            )
    if not events:
        raise ValueError(f"reply {number} has no events")


def _seconds(value: object) -> float:
    """An event's time: a finite number of seconds, 0 or more, as recorded.

    Raises:
        ValueError: it is not one (NaN, infinite, negative, a bool or not a number).
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"an event's time {value!r:.40} is not a number")
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"an event's time {value!r:.40} is not finite seconds >= 0")
    return float(value)


def recorded_info(info: BackendInfo) -> dict[str, Any]:
    """The backend's facts for a trace: a local model path as its folder's name only.

    A trace is shared and replayed elsewhere, where the recording machine's folders mean
    nothing (and may say too much).
    """
    model = Path(info.model)
    local = model.is_absolute() or info.model.startswith((".", "~"))
    recorded = asdict(replace(info, model=model.name if local else info.model))
    recorded.pop("replay_speed")  # how a replay plays, not what was recorded
    return recorded
