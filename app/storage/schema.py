"""The history schema as append-only sqlite-utils migrations: never edit one, add m00N_…."""

from __future__ import annotations

from sqlite_utils import Database, Migrations
from sqlite_utils.db import ForeignKey

MIGRATIONS = Migrations("ling-chat")
"""Applied in order by `Connection`; each runs in one transaction with its bookkeeping."""
READ_WITHOUT = frozenset(
    {"m003_conversation_key_index", "m004_chat_thinking", "m006_message_attachments"}
)
"""Migrations a history can be read without (an index: the same rows, found slower; columns
whose absence reads as their default), so a read-only history that lacks them still opens
for reading."""


def unknown_migrations(db: Database) -> list[str]:
    """Migrations applied to `db` that this ling-chat does not have: a newer one wrote it."""
    known = {migration.name for migration in MIGRATIONS.pending(Database(memory=True))}
    return [m.name for m in MIGRATIONS.applied(db) if m.name not in known]


@MIGRATIONS()
def m001_initial(db: Database) -> None:
    """Engine runs, conversations, messages with full-text search, per-reply measurements."""
    db.table("engine_runs").create(
        {
            "id": int,
            "kind": str,
            "model": str,
            "sglang_version": str,
            "profile": str,
            "proof_summary": str,
            "proof": str,  # ProofReport.to_dict() as JSON
            "started_at": str,
        },
        pk="id",
        not_null=[
            "kind",
            "model",
            "sglang_version",
            "profile",
            "proof_summary",
            "proof",
            "started_at",
        ],
    )
    db.table("conversations").create(
        {
            "id": int,
            "title": str,
            "system_prompt": str,
            "model": str,
            "sampling": str,  # Sampling as JSON
            "created_at": str,
            "updated_at": str,
            "archived": int,
        },
        pk="id",
        not_null=[
            "title",
            "system_prompt",
            "model",
            "sampling",
            "created_at",
            "updated_at",
            "archived",
        ],
        defaults={"archived": 0},
    )
    db.table("messages").create(
        {
            "id": int,
            "conversation_id": int,
            "role": str,
            "content": str,
            "reasoning": str,
            "status": str,  # complete | partial | stopped | error
            "error": str,
            "created_at": str,
            "updated_at": str,
        },
        pk="id",
        not_null=[
            "conversation_id",
            "role",
            "content",
            "reasoning",
            "status",
            "created_at",
            "updated_at",
        ],
        foreign_keys=[
            ForeignKey("messages", "conversation_id", "conversations", "id", on_delete="CASCADE")
        ],
    )
    db.table("messages").create_index(["conversation_id"])
    db.table("measurements").create(
        {
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
            "verify_ct": int,
            "accept_histogram": str,  # JSON list
            "extra": str,  # JSON object
        },
        pk="id",
        not_null=["message_id", "prompt_tokens", "completion_tokens", "latency_s"],
        foreign_keys=[
            ForeignKey("measurements", "message_id", "messages", "id", on_delete="CASCADE"),
            ForeignKey("measurements", "engine_run_id", "engine_runs", "id", on_delete="SET NULL"),
        ],
    )
    db.table("measurements").create_index(["message_id"], unique=True)
    db.table("measurements").create_index(["engine_run_id"])
    # Trigram: substring search in any language (CJK too); terms under 3 characters
    # are matched with LIKE by ChatStore.search.
    db.table("messages").enable_fts(
        ["content", "reasoning"], tokenize="trigram", create_triggers=True
    )


@MIGRATIONS()
def m002_counter_names(db: Database) -> None:
    """One name per counter, as the records name them: `verify_ct` becomes `verify_rounds`,
    and `cached_tokens` moves from the `extra` JSON to a column of its own (an `extra` that
    is not valid JSON is left as it is)."""
    db.execute("ALTER TABLE measurements RENAME COLUMN verify_ct TO verify_rounds")
    db.table("measurements").add_column("cached_tokens", int)
    db.execute(
        """
        UPDATE measurements
        SET cached_tokens = json_extract(extra, '$.cached_tokens'),
            extra = json_remove(extra, '$.cached_tokens')
        WHERE json_valid(extra) AND json_type(extra) = 'object'
            AND json_type(extra, '$.cached_tokens') = 'integer'
        """
    )


@MIGRATIONS()
def m003_conversation_key_index(db: Database) -> None:
    """An index on what makes an imported conversation one already there (its creation time
    and title): the import's duplicate check reads it instead of every conversation."""
    db.table("conversations").create_index(["created_at", "title"])


@MIGRATIONS()
def m004_chat_thinking(db: Database) -> None:
    """Each chat's thinking (`Thinking` as JSON; null: the default), and why a reply was cut
    off (status `cut`: the limit it reached, e.g. "the reply budget of 4,096 tokens")."""
    db.table("conversations").add_column("thinking", str)
    db.table("messages").add_column("cut_reason", str)


@MIGRATIONS()
def m005_message_tree(db: Database) -> None:
    """Messages as a tree: each has a parent (`parent_id`, null for a first message) and is
    or is not its parent's chosen child (`chosen`); the path on screen follows the chosen
    children from the chosen first message. A linear chat becomes one path: each message's
    parent is the one before it, every message chosen. The search index's update trigger
    then reindexes only a change of text, not of these columns."""
    db.execute('DROP TRIGGER IF EXISTS "messages_au"')
    db.execute(
        """
        CREATE TRIGGER "messages_au" AFTER UPDATE OF "content", "reasoning" ON "messages" BEGIN
          INSERT INTO "messages_fts" ("messages_fts", rowid, "content", "reasoning")
            VALUES('delete', old.rowid, old."content", old."reasoning");
          INSERT INTO "messages_fts" (rowid, "content", "reasoning")
            VALUES (new.rowid, new."content", new."reasoning");
        END
        """
    )
    db.execute(
        "ALTER TABLE messages ADD COLUMN parent_id INTEGER"
        " REFERENCES messages(id) ON DELETE CASCADE"
    )
    db.execute("ALTER TABLE messages ADD COLUMN chosen INTEGER NOT NULL DEFAULT 1")
    db.execute(
        """
        UPDATE messages SET parent_id = (
            SELECT max(earlier.id) FROM messages AS earlier
            WHERE earlier.conversation_id = messages.conversation_id AND earlier.id < messages.id
        )
        """
    )
    db.table("messages").create_index(["parent_id"])


@MIGRATIONS()
def m006_message_attachments(db: Database) -> None:
    """The names of the files whose text a user message carries (`attachments`, a JSON list;
    NULL: none). Older messages attached nothing."""
    db.table("messages").add_column("attachments", str)
