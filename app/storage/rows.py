"""Converting between SQLite rows and the store's records."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import fields
from enum import StrEnum
from typing import Any, TypeVar, cast

from sqlite_utils import Database

from app.core.chat import DEFAULT_THINKING, Role, Sampling, Thinking
from app.core.reply_usage import check_count
from app.storage.models import Conversation, EngineRun, MessageStatus, StoredMessage
from app.telemetry import ReplyStats

_SAMPLING_FIELDS = {f.name for f in fields(Sampling)}
_DEFAULT_SAMPLING = Sampling()
_E = TypeVar("_E", bound=StrEnum)
_MEASURED = (
    "prompt_tokens",
    "completion_tokens",
    "ttft_s",
    "latency_s",
    "tpot_s",
    "decode_tps",
    "accept_length",
    "accept_rate",
    "verify_rounds",
    "cached_tokens",
)
_WHOLE = frozenset({"prompt_tokens", "completion_tokens", "verify_rounds", "cached_tokens"})
_REQUIRED = ("prompt_tokens", "completion_tokens", "latency_s")
"""Stats that cannot be unknown: a damaged one reads as 0."""
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
    return json.dumps({name: getattr(sampling, name) for name in _SAMPLING_FIELDS}, sort_keys=True)


def sampling_from(stored: Mapping[str, Any]) -> Sampling:
    """Sampling from its stored or exported dict; keys of other versions are dropped."""
    return Sampling(**{k: v for k, v in stored.items() if k in _SAMPLING_FIELDS})


def stored_sampling(text: Any) -> Sampling:
    """Sampling from its stored JSON; a value that is not a finite number of the right kind
    (or JSON that does not parse) reads as the default, so a damaged row still opens."""
    stored = _json(text, {})
    if not isinstance(stored, dict):
        return _DEFAULT_SAMPLING
    values: dict[str, Any] = {}
    for name in _SAMPLING_FIELDS:
        value, default = stored.get(name), getattr(_DEFAULT_SAMPLING, name)
        kind = int if isinstance(default, int) else int | float
        fits = isinstance(value, kind) and not isinstance(value, bool) and math.isfinite(value)
        values[name] = value if fits else default
    return Sampling(**values)


def thinking_json(thinking: Thinking) -> str:
    """A chat's thinking as the JSON stored in `conversations.thinking` (and exported)."""
    return json.dumps({"enabled": thinking.enabled, "budget": thinking.budget})


def thinking_from(stored: Any) -> Thinking:
    """A chat's thinking from its stored or exported dict (None: the default).

    Raises:
        ValueError: it is not `{"enabled": bool, "budget": int or null}` in range.
    """
    if stored is None:
        return DEFAULT_THINKING
    if not isinstance(stored, Mapping) or not isinstance(stored.get("enabled"), bool):
        raise ValueError(f"thinking {stored!r:.60} is not {{'enabled': bool, 'budget': ...}}")
    budget = stored.get("budget")
    if budget is not None and (type(budget) is not int):
        raise ValueError(f"a thinking budget {budget!r:.40} is not a whole number")
    return Thinking(stored["enabled"], budget)


def stored_thinking(text: Any) -> Thinking:
    """A chat's thinking from its column; a damaged value reads as the default."""
    try:
        return thinking_from(_json(text, None))
    except ValueError:
        return DEFAULT_THINKING


def conversation(row: Mapping[str, Any]) -> Conversation:
    """A `conversations` row as a record (a damaged value reads as a placeholder)."""
    return Conversation(
        id=row["id"],
        title=_text(row["title"]),
        system_prompt=_text(row["system_prompt"]),
        model=_text(row["model"]),
        sampling=stored_sampling(row["sampling"]),
        created_at=_text(row["created_at"]),
        updated_at=_text(row["updated_at"]),
        archived=bool(row["archived"]),
        thinking=stored_thinking(row.get("thinking")),
    )


def engine_run(row: Mapping[str, Any]) -> EngineRun:
    """An `engine_runs` row as a record (a proof that does not parse reads as empty)."""
    proof = _json(row["proof"], {})
    texts = {key: _text(value) for key, value in row.items() if key not in ("id", "proof")}
    return EngineRun(
        **{**texts, "id": row["id"], "proof": proof if isinstance(proof, dict) else {}}
    )


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
        (
            row["id"],
            _choice(MessageStatus, row["status"], MessageStatus.ERROR),
            row["engine_run_id"],
            _stats(row),
        )
        for row in db.query(_MEASURED_SQL)
    ]


def _stats(row: Mapping[str, Any]) -> ReplyStats:
    """A reply's stored stats; a number that is not finite and >= 0, or a count that is not
    one (`check_count`), reads as unknown."""
    histogram = _json(row["accept_histogram"], None)
    extra = _json(row["extra"], {})
    numbers: dict[str, Any] = {
        name: _count(row[name]) if name in _WHOLE else _number(row[name]) for name in _MEASURED
    }
    return ReplyStats(
        **{**numbers, **{name: numbers[name] or 0 for name in _REQUIRED}},
        accept_histogram=(
            tuple(histogram)
            if isinstance(histogram, list) and all(_count(n) is not None for n in histogram)
            else None
        ),
        extra=extra if isinstance(extra, dict) else {},
    )


def _number(value: Any) -> Any:
    """`value` when it is a finite number >= 0, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _count(value: Any) -> int | None:
    """`value` when it is a count (`check_count`), else None."""
    try:
        return check_count(value, "a stored count")
    except ValueError:
        return None


def _json(text: Any, default: Any) -> Any:
    """Stored JSON parsed, or `default` when it is missing or does not parse; a number that
    is not finite (`NaN`, `Infinity`, `1e999`) reads as null."""
    if not isinstance(text, str):
        return default
    try:
        return json.loads(text, parse_constant=lambda _: None, parse_float=_finite_or_none)
    except (ValueError, RecursionError):
        return default


def _finite_or_none(text: str) -> float | None:
    value = float(text)
    return value if math.isfinite(value) else None


def _text(value: Any) -> str:
    """A stored text column; another SQLite type reads as its text form."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return "" if value is None else str(value)


def _message(row: Mapping[str, Any]) -> StoredMessage:
    stats = _stats(row) if row["measured"] is not None else None
    return StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=stored_role(row["role"]),
        content=_text(row["content"]),
        reasoning=_text(row["reasoning"]),
        status=_choice(MessageStatus, row["status"], MessageStatus.ERROR),
        created_at=_text(row["created_at"]),
        stats=stats,
        error=None if row["error"] is None else _text(row["error"]),
        engine_run_id=row["engine_run_id"],
        updated_at=_text(row["updated_at"]),
        cut_reason=None if row.get("cut_reason") is None else _text(row["cut_reason"]),
        parent_id=row["parent_id"],
        chosen=bool(row["chosen"]),
        attachments=attachment_names(row.get("attachments")),
    )


def attachments_json(names: Sequence[str]) -> str | None:
    """Attached files' names as the JSON stored in `messages.attachments` (None: none)."""
    return json.dumps(list(names), ensure_ascii=False) if names else None


def attachment_names(text: Any) -> tuple[str, ...]:
    """A stored `attachments` column: its names; NULL, or what is no JSON list of texts, none."""
    names = _json(text, [])
    if not isinstance(names, list):
        return ()
    return tuple(name for name in names if isinstance(name, str))


def stored_role(value: Any) -> Role:
    """A stored role; one this version does not know reads as a system message."""
    return _choice(Role, value, Role.SYSTEM)


def _choice(kind: type[_E], value: Any, unknown: _E) -> _E:
    """`value` as a member of `kind`, or `unknown` when it is none of them."""
    try:
        return kind(value)
    except ValueError:
        return unknown


def touch(db: Database, conversation_id: int, now: str) -> bool:
    """Bump a conversation's `updated_at`; False when it does not exist."""
    return bool(
        db.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", [now, conversation_id]
        ).rowcount
    )


def insert(db: Database, table: str, row: dict[str, Any]) -> int:
    """Insert one row of plain values (no JSON conversion); returns its integer primary key."""
    return cast(int, db.conn.execute(_insert_sql(table, tuple(row)), tuple(row.values())).lastrowid)


@functools.cache
def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    names = ", ".join(f'"{name}"' for name in columns)
    return f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(columns))})'
