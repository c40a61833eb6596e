"""Reading a JSON or JSONL export (schema version 1, `export.py`) back into a history.

Everything goes in one transaction: a file that fails anywhere adds nothing. Ids are new.
A conversation already present (same creation time and title, e.g. imported before) is
skipped, and an engine run already present is reused, so importing twice adds nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from app.chat import Role
from app.errors import ImportFailed
from app.storage import rows
from app.storage.export import SCHEMA_VERSION
from app.storage.models import MessageStatus
from app.storage.store import ChatStore
from app.telemetry import ReplyStats

_RUN_KEYS = ("kind", "model", "sglang_version", "profile", "proof_summary", "started_at")
_MALFORMED = (
    KeyError,
    TypeError,
    ValueError,
    OverflowError,  # an integer too large for SQLite
    sqlite3.IntegrityError,  # a required value is null
    sqlite3.InterfaceError,  # a value SQLite cannot store
    sqlite3.ProgrammingError,
)
"""What a record of wrong shape or types raises while it is inserted."""
_STATS_NUMBERS = [f.name for f in fields(ReplyStats) if f.name not in ("accept_histogram", "extra")]


@dataclass(frozen=True, slots=True)
class Imported:
    """What an import did."""

    conversations: int
    skipped: int
    """Conversations already in the history."""


def read_export(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The engine runs and conversations of a JSON or JSONL export file.

    Raises:
        ImportFailed: the file cannot be read, or is no ling-chat export of this schema.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailed(f"cannot read {path}: {exc}") from exc
    runs: dict[Any, dict[str, Any]] = {}
    conversations = []
    for where, document in _documents(path, text):
        if not isinstance(document, dict) or document.get("schema_version") != SCHEMA_VERSION:
            raise ImportFailed(
                f"{where}: not a ling-chat export of schema version {SCHEMA_VERSION}"
            )
        found = document.get("conversations", [document.get("conversation")])
        if not isinstance(found, list) or not all(isinstance(c, dict) for c in found):
            raise ImportFailed(f"{where}: no conversations")
        conversations += found
        runs.update((run["id"], run) for run in _engine_runs(where, document))
    return list(runs.values()), conversations


def import_export(store: ChatStore, path: Path) -> Imported:
    """Add the conversations of an export file to `store`, all or nothing.

    Raises:
        ImportFailed: the file is unreadable or malformed (then nothing was added).
        StorageError: the history cannot be written.
    """
    runs, conversations = read_export(path)
    with store.transaction() as db:
        try:
            run_ids = {run["id"]: _run_id(db, run) for run in runs}
            added = sum(_conversation(db, c, run_ids) for c in conversations)
        except _MALFORMED as exc:
            raise ImportFailed(f"{path}: a malformed record ({type(exc).__name__}: {exc})") from exc
    return Imported(added, len(conversations) - added)


def _documents(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    """(where, parsed JSON) for the whole file, or for each line of a JSONL file."""
    try:
        yield str(path), json.loads(text)
        return
    except json.JSONDecodeError:
        pass
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield f"{path}:{number}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFailed(f"{path}:{number}: not JSON ({exc.msg})") from exc


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
        raise TypeError(f"{key} is {type(value).__name__}, not an object")
    return value


def _text(record: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    """`record[key]`, which must be a string (or null or missing, when `optional`)."""
    value = record.get(key) if optional else record[key]
    if not isinstance(value, str) and not (optional and value is None):
        raise TypeError(f"{key} is {type(value).__name__}, not a string")
    return value


def _flag(record: Mapping[str, Any], key: str) -> bool:
    """`record[key]`, which must be true or false."""
    value = record[key]
    if not isinstance(value, bool):
        raise TypeError(f"{key} is {type(value).__name__}, not true or false")
    return value


def _stats(message: Mapping[str, Any]) -> ReplyStats:
    """A reply's measurements: an object whose numbers are numbers (or null)."""
    data = _object(message, "stats")
    for key in _STATS_NUMBERS:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float | None):
            raise TypeError(f"stats.{key} is {type(value).__name__}, not a number")
    histogram = data.get("accept_histogram")
    if histogram is not None and not (
        isinstance(histogram, list) and all(type(n) is int for n in histogram)
    ):
        raise TypeError("stats.accept_histogram is not a list of whole numbers")
    return ReplyStats.from_dict(data)


def _run_id(db: Database, run: Mapping[str, Any]) -> int:
    """The id of the same engine run in `db`, inserting it if it is not there."""
    where = " AND ".join(f"{key} = ?" for key in _RUN_KEYS)
    values = [_text(run, key) for key in _RUN_KEYS]
    for row in db.query(f"SELECT id FROM engine_runs WHERE {where}", values):
        return int(row["id"])
    return rows.insert(
        db,
        "engine_runs",
        {**dict(zip(_RUN_KEYS, values, strict=True)), "proof": json.dumps(run["proof"])},
    )


def _conversation(db: Database, record: Mapping[str, Any], run_ids: Mapping[Any, int]) -> bool:
    """Insert one conversation with its messages; False when it is there already."""
    present = db.query(
        "SELECT 1 FROM conversations WHERE created_at = ? AND title = ?",
        [_text(record, "created_at"), _text(record, "title")],
    )
    if next(iter(present), None) is not None:
        return False
    conversation_id = rows.insert(
        db,
        "conversations",
        {
            "title": _text(record, "title"),
            "system_prompt": _text(record, "system_prompt"),
            "model": _text(record, "model"),
            "sampling": rows.sampling_json(rows.sampling_from(_object(record, "sampling"))),
            "created_at": record["created_at"],
            "updated_at": _text(record, "updated_at"),
            "archived": int(_flag(record, "archived")),
        },
    )
    for message in record["messages"]:
        message_id = rows.insert(
            db,
            "messages",
            {
                "conversation_id": conversation_id,
                "role": Role(message["role"]).value,
                "content": _text(message, "content"),
                "reasoning": _text(message, "reasoning"),
                "status": MessageStatus(message["status"]).value,
                "error": _text(message, "error", optional=True),
                "created_at": _text(message, "created_at"),
                "updated_at": _text(message, "updated_at", optional=True) or message["created_at"],
            },
        )
        if message.get("stats") is not None:
            stats = _stats(message)
            run_id = run_ids.get(message.get("engine_run_id"))
            db.table("measurements").insert(rows.measurement(message_id, run_id, stats))
    return True
