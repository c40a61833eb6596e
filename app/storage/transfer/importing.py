"""Reading a JSON or JSONL export (schema version 2, or 1 from before message trees,
`export.py`) back into a history.

Everything goes in one transaction: a file that fails anywhere adds nothing. Ids are new;
parent links and the path on screen are kept (a version 1 chat is one path).
The JSON is read in pieces (`import_file`), within limits (`import_json`): text size, duplicate
keys, nesting.
A conversation already present (same creation time and title, e.g. imported before) gets
only the messages it lacks (`tree.same_as`: a branch added since), and an engine run
already present is reused, so importing twice adds nothing.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, fields
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from app.core.chat import Role, Sampling, Thinking
from app.core.errors import ImportFailed
from app.core.reply_usage import histogram_in, optional_count_in
from app.storage import rows
from app.storage import tree as branches
from app.storage.models import MessageStatus
from app.storage.store import ChatStore
from app.storage.transfer.export import SCHEMA_VERSION
from app.storage.transfer.import_file import ExportReader
from app.telemetry import ReplyStats
from app.telemetry.metrics import LEGACY_VERIFY_ROUNDS

PRESENT = "SELECT id FROM conversations WHERE created_at = ? AND title = ?"
"""A conversation already in the history: the same creation time and title (indexed)."""
_RUN_KEYS = ("kind", "model", "sglang_version", "profile", "proof_summary", "started_at")
_ERRORS = (
    TypeError,
    RecursionError,  # a proof or extra object nested too deeply to store
    ValueError,
    OverflowError,  # an integer too large for SQLite
    sqlite3.IntegrityError,  # a required value is null
    sqlite3.InterfaceError,  # a value SQLite cannot store
    sqlite3.ProgrammingError,
)
"""What a record of a shape the checks missed raises while it is inserted."""
MAX_NAME_CHARS = 1000
"""The longest title or engine-run name an import takes (a chat list shows about 40)."""
_NAMES = frozenset({"title", *_RUN_KEYS[:-1]})
_VERSIONS = (1, SCHEMA_VERSION)
"""The export versions an import reads: 1 (before message trees) and the current one."""
_MAX_DRAFT_POSITIONS = 64
"""The most accept-histogram entries an import takes (a verify round checks 4 or 9 tokens)."""
_STATS_COUNTS = ("prompt_tokens", "completion_tokens", "verify_rounds", "cached_tokens")
_STATS_NUMBERS = [
    f.name
    for f in fields(ReplyStats)
    if f.name not in ("accept_histogram", "extra", *_STATS_COUNTS)
]


@dataclass(frozen=True, slots=True)
class Imported:
    """What an import did."""

    conversations: int
    skipped: int
    """Conversations already in the history, every message of them too."""
    extended: int = 0
    """Conversations already in the history that gained messages (branches they lacked)."""


Progress = Callable[[int, int], None]
"""Told (bytes read, bytes in all) of the file as an import goes."""


def import_export(store: ChatStore, path: Path, progress: Progress | None = None) -> Imported:
    """Add the conversations of an export file to `store`, all or nothing.

    The file is read in pieces (`import_file`), each conversation checked field by field
    and inserted as it comes, in one transaction; the error names the record and the field,
    e.g. `conversations[0].sampling.temperature`.

    Raises:
        ImportFailed: the file is unreadable, malformed or holds no conversation (then
            nothing was added).
        StorageError: the history cannot be written.
    """
    with ExportReader(path) as reader, store.transaction() as db:
        run_ids: dict[int, int] = {}
        added = extended = total = 0
        for document in reader.documents():
            version = document.fields.get("schema_version")
            if version not in _VERSIONS or type(version) is not int:
                raise ImportFailed(
                    f"{document.where}: not a ling-chat export of schema version 1 or "
                    f"{SCHEMA_VERSION}"
                )
            try:
                for run in _engine_runs(document.where, document.fields):
                    if run["id"] not in run_ids:
                        with _within(f"engine_runs[{len(run_ids)}]"):
                            run_ids[run["id"]] = _run_id(db, run)
                for record in document.conversations:
                    with _within(f"conversations[{total}]"):
                        present, messages = _conversation(db, record, run_ids, tree=version > 1)
                    added += not present
                    extended += present and messages > 0
                    total += 1
                    if progress is not None:
                        progress(reader.done_bytes, reader.size)
            except _Malformed as exc:
                raise ImportFailed(f"{document.where}: {exc}") from exc
        if not total:
            raise ImportFailed(f"no conversations in {path}")
    return Imported(added, total - added - extended, extended)


class _Malformed(Exception):
    """A field of wrong type or range; the message starts with the field's path."""


@contextmanager
def _within(where: str) -> Iterator[None]:
    """Prefix the path of any malformed field inside with `where`."""
    try:
        yield
    except _Malformed as exc:
        raise _Malformed(f"{where}.{exc}") from exc
    except KeyError as exc:
        raise _Malformed(f"{where}: the field {exc} is missing") from exc
    except _ERRORS as exc:
        raise _Malformed(f"{where}: {exc}") from exc


def _engine_runs(where: str, document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A document's engine runs: a list of objects with integer ids."""
    found = document.get("engine_runs", [])
    if not isinstance(found, list) or not all(
        isinstance(run, dict) and type(run.get("id")) is int for run in found
    ):
        raise ImportFailed(f"{where}: engine_runs is not a list of engine runs with ids")
    return found


def _object(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`record[key]`, which must be a JSON object."""
    value = record[key]
    if not isinstance(value, dict):
        raise _Malformed(f"{key}: {_kind(value)}, not an object")
    return value


def _text(record: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    """`record[key]`, which must be a string (or null or missing, when `optional`); a name
    (`_NAMES`) at most `MAX_NAME_CHARS` long."""
    value = record.get(key) if optional else record[key]
    if not isinstance(value, str) and not (optional and value is None):
        raise _Malformed(f"{key}: {_kind(value)}, not a string")
    if key in _NAMES and value is not None and len(value) > MAX_NAME_CHARS:
        raise _Malformed(f"{key}: {len(value):,} characters, over the limit of {MAX_NAME_CHARS:,}")
    return value


def _attachments(message: Mapping[str, Any]) -> list[str]:
    """A message's attached files' names (missing: none; an older export has none)."""
    names = message.get("attachments") or []
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise _Malformed(f"attachments: {_kind(names)}, not a list of file names")
    if any(len(name) > MAX_NAME_CHARS for name in names):
        raise _Malformed(f"attachments: a file name over the limit of {MAX_NAME_CHARS:,}")
    return names


def _date(record: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    """`record[key]`, which must be an ISO-8601 date and time (or null, when `optional`)."""
    value = _text(record, key, optional=optional)
    if value is not None:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise _Malformed(f"{key}: {value!r} is not an ISO-8601 date and time") from None
    return value


def _flag(record: Mapping[str, Any], key: str) -> bool:
    """`record[key]`, which must be true or false."""
    value = record[key]
    if not isinstance(value, bool):
        raise _Malformed(f"{key}: {_kind(value)}, not true or false")
    return value


def _number(
    record: Mapping[str, Any],
    key: str,
    *,
    whole: bool = False,
    low: float = 0.0,
    high: float = math.inf,
    above_low: bool = False,
) -> None:
    """Check that `record[key]`, when present and not null, is a finite number in range."""
    value = record.get(key)
    if value is None:
        return
    kind = "a whole number" if whole else "a number"
    if isinstance(value, bool) or not isinstance(value, int if whole else int | float):
        raise _Malformed(f"{key}: {_kind(value)}, not {kind}")
    opening = "above" if above_low else "at least"
    if not math.isfinite(value) or value < low or (above_low and value == low) or value > high:
        limit = f"{opening} {low:g}" + (f" and at most {high:g}" if high != math.inf else "")
        raise _Malformed(f"{key}: {value!r} is not {kind} {limit}")


def _choice(record: Mapping[str, Any], key: str, kind: type[StrEnum]) -> str:
    """`record[key]`, which must be one of `kind`'s values."""
    value = record[key]
    if not isinstance(value, str) or value not in kind.__members__.values():
        allowed = ", ".join(member.value for member in kind)
        raise _Malformed(f"{key}: {value!r} is not one of {allowed}")
    return str(value)


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def _thinking(record: Mapping[str, Any]) -> Thinking:
    """The conversation's thinking; an export from before it was kept has none (the default)."""
    with _within("thinking"):
        return rows.thinking_from(record.get("thinking"))


def _sampling(record: Mapping[str, Any]) -> Sampling:
    """The conversation's sampling, each value in the range the settings allow."""
    data = _object(record, "sampling")
    with _within("sampling"):
        _number(data, "temperature", high=2.0)
        _number(data, "top_p", high=1.0, above_low=True)
        _number(data, "top_k", whole=True, low=-1)
        _number(data, "max_new_tokens", whole=True, low=1, high=131072)
        return rows.sampling_from(data)


def _stats(message: Mapping[str, Any]) -> ReplyStats:
    """A reply's measurements: finite numbers >= 0 and counts (`check_count`), or null."""
    data = _object(message, "stats")
    with _within("stats"):
        for key in _STATS_NUMBERS:
            _number(data, key)
        extra = data.get("extra")
        try:
            for key in (*_STATS_COUNTS, LEGACY_VERIFY_ROUNDS):
                optional_count_in(data, key)
            if extra is not None:  # an export of an older version kept cached_tokens there
                optional_count_in(_object(data, "extra"), "cached_tokens", "extra.cached_tokens")
        except ValueError as exc:
            raise _Malformed(str(exc)) from None
        histogram = data.get("accept_histogram")
        if isinstance(histogram, list) and len(histogram) > _MAX_DRAFT_POSITIONS:
            raise _Malformed(
                f"accept_histogram: {len(histogram):,} entries, over the limit of "
                f"{_MAX_DRAFT_POSITIONS}"
            )
        try:
            histogram_in(data, "accept_histogram")
        except ValueError as exc:
            raise _Malformed(f"accept_histogram: {exc}") from None
        return ReplyStats.from_dict(data)


def _run_id(db: Database, run: Mapping[str, Any]) -> int:
    """The id of the same engine run in `db`, inserting it if it is not there."""
    where = " AND ".join(f"{key} = ?" for key in _RUN_KEYS)
    values = [(_date if key == "started_at" else _text)(run, key) for key in _RUN_KEYS]
    _object(run, "proof")
    for row in db.query(f"SELECT id FROM engine_runs WHERE {where}", values):
        return int(row["id"])
    return rows.insert(
        db,
        "engine_runs",
        {**dict(zip(_RUN_KEYS, values, strict=True)), "proof": json.dumps(run["proof"])},
    )


def _conversation(
    db: Database, record: Mapping[str, Any], run_ids: Mapping[Any, int], *, tree: bool
) -> tuple[bool, int]:
    """Insert one conversation with its messages, or the messages it lacks when it is there
    already; (whether it was there, how many messages were added). `tree`: the messages
    carry their parent links and path (version 2), else they are one path."""
    key = [_date(record, "created_at"), _text(record, "title")]
    found = db.conn.execute(PRESENT, key).fetchone()
    if found is not None:
        conversation_id, known = found[0], branches.known(db, found[0])
    else:
        conversation_id, known = _insert_conversation(db, record), {}
    messages = record["messages"]
    if not isinstance(messages, list):
        raise _Malformed(f"messages: {_kind(messages)}, not a list")
    new_ids: dict[int, int] = {}
    """The exported id of each message read so far, and its id here."""
    added: set[int] = set()
    previous = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _Malformed(f"messages[{index}]: {_kind(message)}, not an object")
        with _within(f"messages[{index}]"):
            parent_id, chosen = _place(message, new_ids) if tree else (previous, True)
            row = _message_row(conversation_id, message, parent_id, chosen)
            previous = known.get(branches.same_as(row))
            if previous is None:
                if found is not None and parent_id not in added:
                    row["chosen"] = 0  # beside messages there already: the path stays as it is
                previous = _insert_message(db, row, message, run_ids)
                added.add(previous)
            if tree:
                new_ids[message["id"]] = previous
    return found is not None, len(added)


def _insert_conversation(db: Database, record: Mapping[str, Any]) -> int:
    return rows.insert(
        db,
        "conversations",
        {
            "title": _text(record, "title"),
            "system_prompt": _text(record, "system_prompt"),
            "model": _text(record, "model"),
            "sampling": rows.sampling_json(_sampling(record)),
            "thinking": rows.thinking_json(_thinking(record)),
            "created_at": record["created_at"],
            "updated_at": _date(record, "updated_at"),
            "archived": int(_flag(record, "archived")),
        },
    )


def _place(message: Mapping[str, Any], new_ids: Mapping[int, int]) -> tuple[int | None, bool]:
    """A version 2 message's parent here and whether it is chosen; its `id` must be new
    and its `parent_id` null or the id of an earlier message of its conversation."""
    message_id, parent = message["id"], message["parent_id"]
    if type(message_id) is not int or message_id in new_ids:
        raise _Malformed(f"id: {message_id!r} is not a whole number unique in its conversation")
    if parent is not None and (type(parent) is not int or parent not in new_ids):
        raise _Malformed(
            f"parent_id: {parent!r} is not null or the id of an earlier message of the conversation"
        )
    return (None if parent is None else new_ids[parent]), _flag(message, "chosen")


def _message_row(
    conversation_id: int, message: Mapping[str, Any], parent_id: int | None, chosen: bool
) -> dict[str, Any]:
    """A message's `messages` row, each field checked."""
    return {
        "conversation_id": conversation_id,
        "role": _choice(message, "role", Role),
        "content": _text(message, "content"),
        "reasoning": _text(message, "reasoning"),
        "status": _choice(message, "status", MessageStatus),
        "error": _text(message, "error", optional=True),
        "cut_reason": _text(message, "cut_reason", optional=True),
        "created_at": _date(message, "created_at"),
        "updated_at": _date(message, "updated_at", optional=True) or message["created_at"],
        "parent_id": parent_id,
        "chosen": int(chosen),
        "attachments": rows.attachments_json(_attachments(message)),
    }


def _insert_message(
    db: Database, row: dict[str, Any], message: Mapping[str, Any], run_ids: Mapping[Any, int]
) -> int:
    """Insert one message's row and its measurements; returns its id."""
    message_id = rows.insert(db, "messages", row)
    if message.get("stats") is not None:
        stats = _stats(message)
        run_id = run_ids.get(message.get("engine_run_id"))
        rows.insert(db, "measurements", rows.measurement(message_id, run_id, stats))
    return message_id
