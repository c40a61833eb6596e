"""Reading a JSON or JSONL export (schema version 1, `export.py`) back into a history.

Everything goes in one transaction: a file that fails anywhere adds nothing. Ids are new.
A conversation already present (same creation time and title, e.g. imported before) is
skipped, and an engine run already present is reused, so importing twice adds nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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
        for run in document.get("engine_runs", []):
            runs[run.get("id") if isinstance(run, dict) else None] = run
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
        except (KeyError, TypeError, ValueError) as exc:
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


def _run_id(db: Database, run: Mapping[str, Any]) -> int:
    """The id of the same engine run in `db`, inserting it if it is not there."""
    where = " AND ".join(f"{key} = ?" for key in _RUN_KEYS)
    values = [run[key] for key in _RUN_KEYS]
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
        [record["created_at"], record["title"]],
    )
    if next(iter(present), None) is not None:
        return False
    conversation_id = rows.insert(
        db,
        "conversations",
        {
            "title": str(record["title"]),
            "system_prompt": str(record["system_prompt"]),
            "model": str(record["model"]),
            "sampling": rows.sampling_json(rows.sampling_from(record["sampling"])),
            "created_at": record["created_at"],
            "updated_at": record["updated_at"],
            "archived": int(bool(record["archived"])),
        },
    )
    for message in record["messages"]:
        message_id = rows.insert(
            db,
            "messages",
            {
                "conversation_id": conversation_id,
                "role": Role(message["role"]).value,
                "content": str(message["content"]),
                "reasoning": str(message["reasoning"]),
                "status": MessageStatus(message["status"]).value,
                "error": message["error"],
                "created_at": message["created_at"],
                "updated_at": message.get("updated_at") or message["created_at"],
            },
        )
        if message.get("stats") is not None:
            stats = ReplyStats.from_dict(message["stats"])
            run_id = run_ids.get(message.get("engine_run_id"))
            db.table("measurements").insert(rows.measurement(message_id, run_id, stats))
    return True
