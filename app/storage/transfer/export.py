"""Exporting conversations as JSON, JSONL or CSV text (the caller writes the file).

JSON (schema version 2) is one document:
    {"schema_version": 2, "exported_at": ISO, "engine_runs": [run, ...],
     "conversations": [conversation, ...]}
JSONL holds one self-contained conversation per line (an empty history is an empty file):
    {"schema_version": 2, "engine_runs": [the runs it uses], "conversation": conversation}
A conversation has every `Conversation` field plus "messages": every message of every
branch, oldest first, each with every `StoredMessage` field ("parent_id": the "id" of an
earlier message of the conversation or null, "chosen": whether it is on the path on screen
among its parent's children, `tree`), "stats" as `ReplyStats.to_dict()` or null; a run every
`EngineRun` field. Version 1 (before message trees) had no "parent_id" and "chosen": its
messages were one path, oldest first.
CSV holds one row per measured reply (`CSV_COLUMNS`): its numbers and the engine that made
them, for a spreadsheet; no text cell starts a formula.

JSON strings write every character a terminal would act on as a `\\u` escape (`app.textsafe`):
the same data, safe to print.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from app.storage.database import utc_now
from app.storage.models import EngineRun, StoredMessage, Thread
from app.storage.store import ChatStore
from app.textsafe import escaped

SCHEMA_VERSION = 2
"""Bumped whenever a JSON/JSONL field changes meaning or goes away (2: "messages" holds every
branch, linked by "parent_id")."""
_RUN_COLUMNS = ("model", "profile", "kind", "sglang_version")
_STATS_COLUMNS = (
    "prompt_tokens",
    "cached_tokens",
    "completion_tokens",
    "ttft_s",
    "tpot_s",
    "decode_tps",
    "latency_s",
    "accept_length",
    "accept_rate",
    "verify_rounds",
)
CSV_COLUMNS = (
    "conversation_id",
    "title",
    "message_id",
    "created_at",
    "status",
    *_RUN_COLUMNS,
    *_STATS_COLUMNS,
)


@dataclass(frozen=True, slots=True)
class Export:
    """Everything an export holds."""

    threads: list[Thread]
    engine_runs: dict[int, EngineRun]
    """The engine runs the replies were measured on, by id."""
    exported_at: str


def collect(store: ChatStore, ids: Sequence[int] | None = None) -> Export:
    """Read the given conversations (in that order), or all of them oldest first.

    Archived conversations are included; an unknown id raises StorageError.
    """
    if ids is None:
        conversations = sorted(store.list_conversations(include_archived=True), key=lambda c: c.id)
    else:
        conversations = [store.get_conversation(i) for i in dict.fromkeys(ids)]
    threads = [Thread(c, store.all_messages(c.id)) for c in conversations]
    run_ids = sorted({run_id for thread in threads for run_id in _run_ids(thread)})
    runs = {run_id: store.get_engine_run(run_id) for run_id in run_ids}
    return Export(threads, runs, utc_now())


def as_json(export: Export) -> Iterator[str]:
    """The export as one JSON document."""
    document = {
        "schema_version": SCHEMA_VERSION,
        "exported_at": export.exported_at,
        "engine_runs": [_run_record(run) for run in export.engine_runs.values()],
        "conversations": [_thread_record(thread) for thread in export.threads],
    }
    yield _dumps(document, indent=2) + "\n"


def as_jsonl(export: Export) -> Iterator[str]:
    """The export as JSON Lines, one conversation per line."""
    for thread in export.threads:
        line = {
            "schema_version": SCHEMA_VERSION,
            "engine_runs": [_run_record(export.engine_runs[i]) for i in sorted(_run_ids(thread))],
            "conversation": _thread_record(thread),
        }
        yield _dumps(line) + "\n"


def as_csv(export: Export) -> Iterator[str]:
    """One CSV row per measured reply of every branch; a reply whose engine run is unknown
    leaves those blank."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")  # RFC 4180; a CR in a cell gets quoted
    writer.writerow(CSV_COLUMNS)
    measured = (
        (thread, message)
        for thread in export.threads
        for message in thread.messages
        if message.stats is not None
    )
    for thread, message in measured:
        run = export.engine_runs.get(message.engine_run_id or 0)
        cells = [
            thread.conversation.id,
            thread.conversation.title,
            message.id,
            message.created_at,
            message.status.value,
            *(_run_cell(run, name) for name in _RUN_COLUMNS),
            *(_blank_if_none(getattr(message.stats, name)) for name in _STATS_COLUMNS),
        ]
        writer.writerow([_as_text(cell) if isinstance(cell, str) else cell for cell in cells])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
    yield buffer.getvalue()  # the header of an empty history


def _run_cell(run: EngineRun | None, name: str) -> Any:
    """A run's cell: blank without a run; its profile labelled unproven where it was."""
    if run is None:
        return ""
    return run.profile_label if name == "profile" else getattr(run, name)


def _blank_if_none(value: Any) -> Any:
    return "" if value is None else value


def _as_text(text: str) -> str:
    """`text` as a spreadsheet cell that is never run as a formula (a leading `'`)."""
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""What a spreadsheet may read as a formula's start (OWASP's list, and the full-width = + - @
that some spreadsheets convert)."""


def _dumps(value: Any, indent: int | None = None) -> str:
    """Strict JSON, readable UTF-8 but for the characters a terminal acts on (escaped)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent, allow_nan=False)
    return escaped(text, lambda char: json.dumps(char)[1:-1])


def _run_ids(thread: Thread) -> set[int]:
    return {m.engine_run_id for m in thread.messages if m.engine_run_id is not None}


def _thread_record(thread: Thread) -> dict[str, Any]:
    record = asdict(thread.conversation)
    record["messages"] = [_message_record(message) for message in thread.messages]
    return record


def _message_record(message: StoredMessage) -> dict[str, Any]:
    record = {field.name: getattr(message, field.name) for field in fields(message)}
    record["stats"] = message.stats.to_dict() if message.stats is not None else None
    return record


def _run_record(run: EngineRun) -> dict[str, Any]:
    return {**asdict(run), "proof": dict(run.proof)}
