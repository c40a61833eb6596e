"""Converting between SQLite rows and the store's records."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, fields
from typing import Any, cast

from sqlite_utils import Database

from app.chat import Role, Sampling
from app.storage.models import Conversation, EngineRun, MessageStatus, StoredMessage
from app.telemetry import ReplyStats

_SAMPLING_FIELDS = {f.name for f in fields(Sampling)}
_MEASURED = (
    "prompt_tokens",
    "completion_tokens",
    "ttft_s",
    "latency_s",
    "tpot_s",
    "decode_tps",
    "accept_length",
    "accept_rate",
    "verify_ct",
)
_STATS_COLUMNS = f"{', '.join(f'r.{c}' for c in _MEASURED)}, r.accept_histogram, r.extra"
_MESSAGES_SQL = f"""
SELECT m.*, r.id AS measured, r.engine_run_id, {_STATS_COLUMNS}
FROM messages AS m LEFT JOIN measurements AS r ON r.message_id = m.id
WHERE {{where}} ORDER BY m.id
"""
_MEASURED_SQL = f"""
SELECT m.id, m.status, r.engine_run_id, {_STATS_COLUMNS}
FROM measurements AS r JOIN messages AS m ON m.id = r.message_id ORDER BY m.id
"""


def sampling_json(sampling: Sampling) -> str:
    """Sampling as the JSON stored in `conversations.sampling`."""
    return json.dumps(asdict(sampling), sort_keys=True)


def sampling_from(stored: Mapping[str, Any]) -> Sampling:
    """Sampling from its stored or exported dict; keys of other versions are dropped."""
    return Sampling(**{k: v for k, v in stored.items() if k in _SAMPLING_FIELDS})


def conversation(row: Mapping[str, Any]) -> Conversation:
    """A `conversations` row as a record."""
    return Conversation(
        id=row["id"],
        title=row["title"],
        system_prompt=row["system_prompt"],
        model=row["model"],
        sampling=sampling_from(json.loads(row["sampling"])),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        archived=bool(row["archived"]),
    )


def engine_run(row: Mapping[str, Any]) -> EngineRun:
    """An `engine_runs` row as a record."""
    return EngineRun(**{**row, "proof": json.loads(row["proof"])})


def measurement(message_id: int, engine_run_id: int | None, stats: ReplyStats) -> dict[str, Any]:
    """The `measurements` row for a reply's stats."""
    histogram = stats.accept_histogram
    return {
        "message_id": message_id,
        "engine_run_id": engine_run_id,
        **{name: getattr(stats, name) for name in _MEASURED},
        "accept_histogram": json.dumps(list(histogram)) if histogram is not None else None,
        "extra": json.dumps(dict(stats.extra), default=str),
    }


def select_messages(db: Database, where: str, params: Sequence[Any]) -> list[StoredMessage]:
    """Messages matching a WHERE clause over `m` (messages), oldest first, with their stats."""
    return [_message(row) for row in db.query(_MESSAGES_SQL.format(where=where), params)]


def select_measured(db: Database) -> list[tuple[int, MessageStatus, int | None, ReplyStats]]:
    """(message id, status, engine run id, stats) of every measured reply, oldest first."""
    return [
        (row["id"], MessageStatus(row["status"]), row["engine_run_id"], _stats(row))
        for row in db.query(_MEASURED_SQL)
    ]


def _stats(row: Mapping[str, Any]) -> ReplyStats:
    histogram = row["accept_histogram"]
    return ReplyStats(
        **{name: row[name] for name in _MEASURED},
        accept_histogram=tuple(json.loads(histogram)) if histogram is not None else None,
        extra=json.loads(row["extra"]),
    )


def _message(row: Mapping[str, Any]) -> StoredMessage:
    stats = _stats(row) if row["measured"] is not None else None
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=Role(row["role"]),
        content=row["content"],
        reasoning=row["reasoning"],
        status=MessageStatus(row["status"]),
        created_at=row["created_at"],
        stats=stats,
        error=row["error"],
        engine_run_id=row["engine_run_id"],
        updated_at=row["updated_at"],
    )


def touch(db: Database, conversation_id: int, now: str) -> bool:
    """Bump a conversation's `updated_at`; False when it does not exist."""
    return bool(
        db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", [now, conversation_id]
        ).rowcount
    )


def insert(db: Database, table: str, row: dict[str, Any]) -> int:
    """Insert one row; returns its integer primary key."""
    return cast(int, db.table(table).insert(row).last_pk)
