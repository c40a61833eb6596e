"""Migrations from an empty file, idempotent re-opening, and the connection's settings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from app import __version__
from app.core.chat import DEFAULT_THINKING, Thinking
from app.core.errors import StorageError
from app.storage import ChatStore, MessageStatus
from app.storage.schema import MIGRATIONS

EXPECTED_COLUMNS = {
    "engine_runs": {
        "id": int,
        "kind": str,
        "model": str,
        "sglang_version": str,
        "profile": str,
        "proof_summary": str,
        "proof": str,
        "started_at": str,
    },
    "conversations": {
        "id": int,
        "title": str,
        "system_prompt": str,
        "model": str,
        "sampling": str,
        "created_at": str,
        "updated_at": str,
        "archived": int,
        "thinking": str,
    },
    "messages": {
        "id": int,
        "conversation_id": int,
        "role": str,
        "content": str,
        "reasoning": str,
        "status": str,
        "error": str,
        "created_at": str,
        "updated_at": str,
        "cut_reason": str,
        "parent_id": int,
        "chosen": int,
        "attachments": str,
    },
    "measurements": {
        "id": int,
        "message_id": int,
        "engine_run_id": int,
        "prompt_tokens": int,
        "completion_tokens": int,
        "ttft_s": float,
        "tpot_s": float,
        "decode_tps": float,
        "latency_s": float,
        "accept_length": float,
        "accept_rate": float,
        "verify_rounds": int,
        "cached_tokens": int,
        "accept_histogram": str,
        "extra": str,
    },
}


def test_opening_a_missing_file_creates_folders_and_the_full_schema(db_path: Path) -> None:
    ChatStore.open(db_path).close()

    with Database(db_path) as db:
        for table, columns in EXPECTED_COLUMNS.items():
            assert db.table(table).columns_dict == columns
        assert db.table("messages").detect_fts() == "messages_fts"
        assert "trigram" in db.table("messages_fts").schema
        cascades = {
            (fk.table, fk.column, fk.on_delete)
            for table in ("messages", "measurements")
            for fk in db.table(table).foreign_keys
        }
        applied = [m.name for m in MIGRATIONS.applied(db)]
        pending = MIGRATIONS.pending(db)
        indexes = {tuple(index.columns) for index in db.table("conversations").indexes}
    assert cascades == {
        ("messages", "conversation_id", "CASCADE"),
        ("messages", "parent_id", "CASCADE"),
        ("measurements", "message_id", "CASCADE"),
        ("measurements", "engine_run_id", "SET NULL"),
    }
    assert applied == [
        "m001_initial",
        "m002_counter_names",
        "m003_conversation_key_index",
        "m004_chat_thinking",
        "m005_message_tree",
        "m006_message_attachments",
    ]
    assert pending == []
    assert ("created_at", "title") in indexes  # the import's duplicate check


def test_reopening_applies_nothing_twice_and_keeps_the_data(db_path: Path) -> None:
    with ChatStore.open(db_path) as store:
        conversation = store.create_conversation("kept")
    with Database(db_path) as db:
        schema = db.schema

    with ChatStore.open(db_path) as store:
        assert store.get_conversation(conversation.id) == conversation

    with Database(db_path) as db:
        assert db.schema == schema
        # each migration once
        assert db.table("_sqlite_migrations").count == len(
            MIGRATIONS.pending(Database(memory=True))
        )


def test_the_connection_uses_wal_full_sync_foreign_keys_and_the_busy_timeout(
    db_path: Path,
) -> None:
    with ChatStore.open(db_path, busy_timeout_s=1.25) as store:
        db = store._connection.db
        pragmas = {
            name: db.execute(f"PRAGMA {name}").fetchone()[0]
            for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
        }
    assert pragmas == {
        "journal_mode": "wal",
        "synchronous": 2,
        "foreign_keys": 1,
        "busy_timeout": 1250,
    }
    with Database(db_path) as db:
        assert db.journal_mode == "wal"  # persistent in the file


def test_a_history_from_a_newer_ling_chat_is_refused_in_one_line_and_left_untouched(
    tmp_path: Path,
) -> None:
    path = tmp_path / "history.db"
    with ChatStore.open(path) as store:
        chat = store.create_conversation("kept")
        store.add_user_message(chat.id, "hello")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO _sqlite_migrations (migration_set, name, applied_at)"
            " VALUES ('ling-chat', 'm002_from_the_future', '2030-01-01')"
        )
    conn.close()
    before = path.read_bytes()
    files = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(StorageError) as caught:
        ChatStore.open(path)
    assert str(caught.value) == (
        f"{path} was written by a newer ling-chat (its schema has m002_from_the_future, which "
        f"ling-chat {__version__} does not know); it was left untouched: upgrade ling-chat to "
        "open it"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == files


def test_a_history_of_the_first_schema_reads_its_counters_under_their_one_name(
    db_path: Path,
) -> None:
    """m002: `verify_ct` became `verify_rounds`, and `extra`'s `cached_tokens` a column; an
    `extra` that is no JSON object stays as it was."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with Database(db_path) as db:
        MIGRATIONS.apply(db, stop_before="m002_counter_names")
        now = "2026-12-01T00:00:00+00:00"
        db["conversations"].insert(
            {"id": 1, "title": "t", "system_prompt": "", "model": "m", "sampling": "{}"}
            | {"created_at": now, "updated_at": now}
        )
        for message_id, extra in ((1, '{"cached_tokens": 7, "x": 1}'), (2, "not json")):
            db["messages"].insert(
                {"id": message_id, "conversation_id": 1, "role": "assistant", "content": "a"}
                | {"reasoning": "", "status": "complete", "created_at": now, "updated_at": now}
            )
            db["measurements"].insert(
                {"message_id": message_id, "prompt_tokens": 3, "completion_tokens": 26}
                | {"latency_s": 1.0, "verify_ct": 13, "extra": extra}
            )
    with ChatStore.open(db_path) as store:
        stats = [m.stats for m in store.messages(1)]
    assert [(s.verify_rounds, s.cached_tokens, s.extra) for s in stats if s] == [
        (13, 7, {"x": 1}),
        (13, None, {}),
    ]


def test_a_history_of_today_s_schema_opens_with_default_thinking_and_no_cut_replies(
    db_path: Path,
) -> None:
    """m004 on a real file written with the schema before it: its chats think as by default,
    its replies keep their status, and a chat's thinking and a cut reply are stored after."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with Database(db_path) as db:
        MIGRATIONS.apply(db, stop_before="m004_chat_thinking")
        now = "2026-12-01T00:00:00+00:00"
        db["conversations"].insert(
            {"id": 1, "title": "old", "system_prompt": "", "model": "m", "sampling": "{}"}
            | {"created_at": now, "updated_at": now, "archived": 0}
        )
        db["messages"].insert(
            {"id": 1, "conversation_id": 1, "role": "assistant", "content": "a"}
            | {"reasoning": "r", "status": "stopped", "created_at": now, "updated_at": now}
        )
    with ChatStore.open(db_path) as store:
        old = store.get_conversation(1)
        (reply,) = store.messages(1)
        store.update_settings(1, thinking=Thinking(enabled=False))
        writer = store.start_reply(1)
        writer.append(answer="cut here")
        writer.finish(MessageStatus.CUT, cut_reason="the reply budget of 4,096 tokens")
    assert old.thinking == DEFAULT_THINKING
    assert (reply.status, reply.cut_reason, reply.continuable) == (
        MessageStatus.STOPPED,
        None,
        True,
    )
    with ChatStore.open(db_path) as store:  # reopened: what was stored after the migration
        assert store.get_conversation(1).thinking == Thinking(enabled=False)
        cut = store.messages(1)[-1]
    assert (cut.status, cut.cut_reason) == (MessageStatus.CUT, "the reply budget of 4,096 tokens")
