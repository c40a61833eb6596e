"""ChatStore: the one way into the history database (conversations, messages, search)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, cast

from sqlite_utils import Database

from app.core.chat import DEFAULT_THINKING, MAX_TEXT_CHARS, Role, Sampling, Thinking
from app.core.errors import StorageError
from app.core.proof_report import ProofReport
from app.files import new_file
from app.storage import rows, tree
from app.storage.database import Connection, utc_now, writable
from app.storage.matching import count_matches, search
from app.storage.models import (
    Conversation,
    EngineRun,
    MeasuredReply,
    MessageStatus,
    SearchHit,
    StoredMessage,
)
from app.storage.writer import ReplyWriter


class ChatStore:
    """Conversations, messages and measurements in one SQLite file.

    Every method commits before it returns; failures raise one-line `StorageError`s
    (`DatabaseCorrupt`, `DatabaseLocked`). Use a store on the thread that opened it.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    @classmethod
    def open(cls, path: Path, busy_timeout_s: float = 5.0) -> ChatStore:
        """Open (creating and migrating as needed) the history file.

        Args:
            path: the database file; missing parent folders are created.
            busy_timeout_s: how long to wait for another process's write lock.

        Raises:
            DatabaseCorrupt: the file is not a usable SQLite database (left untouched).
            DatabaseLocked: a migration waited past the busy timeout.
            StorageError: the file or its folder cannot be created, read or written.
        """
        return cls(Connection(path, busy_timeout_s))

    @classmethod
    def open_to_read(cls, path: Path, busy_timeout_s: float = 5.0) -> ChatStore:
        """`open` for the commands that only read: where the file or its folder cannot be
        written (`writable`), the history opens read-only instead (`Connection`), and any
        change fails in one line that says so."""
        return cls(Connection(path, busy_timeout_s, read_only=not writable(path)))

    def check_writable(self) -> None:
        """Take the write lock and let it go: a history that cannot be written fails now.

        Raises:
            DatabaseLocked: another process holds the write lock past the busy timeout.
            StorageError: the file cannot be written.
        """
        with self._connection.write():
            pass

    @property
    def path(self) -> Path:
        """The database file."""
        return self._connection.path

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """One write transaction over the raw tables (for bulk work such as an import)."""
        with self._connection.write() as db:
            yield db

    def close(self) -> None:
        """Close the database."""
        self._connection.close()

    def __enter__(self) -> ChatStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def record_engine_run(
        self, *, kind: str, model: str, sglang_version: str, profile: str, proof: dict[str, Any]
    ) -> int:
        """Remember one start of the model side; returns its id for `start_reply`.

        Args:
            kind: `engine`, `server` or `replay`.
            model: the checkpoint served.
            sglang_version: SGLang's version string.
            profile: the optimization profile.
            proof: `ProofReport.to_dict()`, or `{}` when no proof ran.
        """
        summary = ProofReport.from_dict(proof).summary() if proof else ""
        row = {
            "kind": kind,
            "model": model,
            "sglang_version": sglang_version,
            "profile": profile,
            "proof_summary": summary,
            "proof": json.dumps(proof),
            "started_at": utc_now(),
        }
        with self._connection.write() as db:
            return rows.insert(db, "engine_runs", row)

    def get_engine_run(self, run_id: int) -> EngineRun:
        """One engine run; an unknown id raises StorageError."""
        with self._connection.errors():
            found = list(
                self._connection.db.query("SELECT * FROM engine_runs WHERE id = ?", [run_id])
            )
        if not found:
            raise StorageError(f"no engine run {run_id}")
        return rows.engine_run(found[0])

    def create_conversation(
        self,
        title: str = "New chat",
        *,
        system_prompt: str = "",
        model: str = "",
        sampling: Sampling | None = None,
        thinking: Thinking = DEFAULT_THINKING,
    ) -> Conversation:
        """Start a conversation (default sampling when none is given)."""
        now = utc_now()
        row = {
            "title": title,
            "system_prompt": system_prompt,
            "model": model,
            "sampling": rows.sampling_json(sampling or Sampling()),
            "thinking": rows.thinking_json(thinking),
            "created_at": now,
            "updated_at": now,
            "archived": 0,
        }
        with self._connection.write() as db:
            conversation_id = rows.insert(db, "conversations", row)
        return self.get_conversation(conversation_id)

    def list_conversations(
        self, *, include_archived: bool = False, limit: int | None = None
    ) -> list[Conversation]:
        """Conversations, most recently updated first."""
        where = "" if include_archived else "WHERE archived = 0"
        sql = f"SELECT * FROM conversations {where} ORDER BY updated_at DESC, id DESC LIMIT ?"
        with self._connection.errors():
            found = self._connection.db.query(sql, [-1 if limit is None else limit])
            return [rows.conversation(row) for row in found]

    def count_conversations(self, *, include_archived: bool = False) -> int:
        """How many conversations `list_conversations` would list without a limit."""
        where = "" if include_archived else "WHERE archived = 0"
        with self._connection.errors():
            (row,) = self._connection.db.query(f"SELECT count(*) AS n FROM conversations {where}")
        return int(row["n"])

    def get_conversation(self, conversation_id: int) -> Conversation:
        """One conversation; an unknown id raises StorageError."""
        with self._connection.errors():
            found = list(
                self._connection.db.query(
                    "SELECT * FROM conversations WHERE id = ?", [conversation_id]
                )
            )
        if not found:
            raise StorageError(f"no conversation {conversation_id}")
        return rows.conversation(found[0])

    def message_counts(self) -> dict[int, int]:
        """Number of messages per conversation id (conversations without any are left out)."""
        sql = "SELECT conversation_id, count(*) AS n FROM messages GROUP BY conversation_id"
        with self._connection.errors():
            return {row["conversation_id"]: row["n"] for row in self._connection.db.query(sql)}

    def rename(self, conversation_id: int, title: str) -> None:
        """Change a conversation's title."""
        self._update_conversation(conversation_id, title=title)

    def set_archived(self, conversation_id: int, archived: bool) -> None:
        """Hide a conversation from the default list, or bring it back."""
        self._update_conversation(conversation_id, archived=int(archived))

    def update_settings(
        self,
        conversation_id: int,
        *,
        system_prompt: str | None = None,
        sampling: Sampling | None = None,
        thinking: Thinking | None = None,
    ) -> None:
        """Change the system prompt, sampling or thinking of later replies (None keeps one)."""
        changes: dict[str, Any] = {}
        if thinking is not None:
            changes["thinking"] = rows.thinking_json(thinking)
        if system_prompt is not None:
            changes["system_prompt"] = system_prompt
        if sampling is not None:
            changes["sampling"] = rows.sampling_json(sampling)
        self._update_conversation(conversation_id, **changes)

    def delete_conversation(self, conversation_id: int) -> None:
        """Delete a conversation with its messages and measurements, leaving no trace.

        Secure delete zeroes the freed pages, merging the search index drops the deleted
        text from it, and a truncating checkpoint empties the write-ahead log, which
        still holds the pages as they were before.
        """
        with self._connection.write() as db:
            if not db.execute("DELETE FROM conversations WHERE id = ?", [conversation_id]).rowcount:
                raise StorageError(f"no conversation {conversation_id}")
            db.execute("INSERT INTO messages_fts(messages_fts) VALUES('optimize')")
        with self._connection.errors():
            self._connection.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def backup(self, path: Path, *, replace: bool = False) -> None:
        """Write a consistent copy of the whole history to `path` (`VACUUM INTO`), whole or
        not at all, never through a link (`app.files`).

        Raises:
            TargetExists: `path` exists and `replace` is False.
            ExportError: `path` is a link or cannot be written.
            StorageError: the history or the copy failed (no part of the copy is left).
        """
        with new_file(path, replace=replace) as temp, self._connection.errors():
            try:  # VACUUM INTO fills the empty, private temporary file and keeps its mode
                self._connection.db.execute("VACUUM INTO ?", [str(temp)])
            except sqlite3.Error as exc:
                temp.with_name(f"{temp.name}-journal").unlink(missing_ok=True)
                if not getattr(exc, "sqlite_errorname", "").startswith(_WRITE_ERRORS):
                    raise  # about the history itself: `errors()` describes it
                raise self._connection.describe(exc, path) from exc

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        """The messages on screen (the chosen path, `tree`), with their measurements."""
        return tree.path(self.all_messages(conversation_id))

    def all_messages(self, conversation_id: int) -> list[StoredMessage]:
        """A conversation's messages of every branch, oldest first, with their measurements."""
        self.get_conversation(conversation_id)
        with self._connection.errors():
            return rows.select_messages(
                self._connection.db, "m.conversation_id = ?", [conversation_id]
            )

    def measured_replies(self) -> list[MeasuredReply]:
        """Every measured reply's numbers and engine run, oldest first, without its text."""
        with self._connection.errors():
            found = rows.select_measured(self._connection.db)
            run_ids = sorted({run_id for _, _, run_id, _ in found if run_id is not None})
            runs = {run_id: self.get_engine_run(run_id) for run_id in run_ids}
        return [
            MeasuredReply(message_id, status, stats, runs.get(run_id) if run_id else None)
            for message_id, status, run_id, stats in found
        ]

    def add_user_message(
        self,
        conversation_id: int,
        content: str,
        *,
        alternative_to: int | None = None,
        attachments: Sequence[str] = (),
    ) -> StoredMessage:
        """Store (and commit) the user's message after the last one on screen, or, given
        `alternative_to`, beside that message (an edit: a new branch, the old one kept); it
        goes on the path on screen. Call it before generation starts. `attachments`: the
        names of the files whose text `content` carries.

        Raises:
            StorageError: the message is longer than `MAX_TEXT_CHARS` (nothing is stored).
        """
        if len(content) > MAX_TEXT_CHARS:
            raise StorageError(
                f"a message of {len(content):,} characters is over the limit of "
                f"{MAX_TEXT_CHARS:,}, the model's whole context; send it in parts"
            )
        now = utc_now()
        row = {
            "conversation_id": conversation_id,
            "role": Role.USER.value,
            "content": content,
            "reasoning": "",
            "status": MessageStatus.COMPLETE.value,
            "error": None,
            "created_at": now,
            "updated_at": now,
            "attachments": rows.attachments_json(attachments),
        }
        with self._connection.write() as db:
            if not rows.touch(db, conversation_id, now):
                raise StorageError(f"no conversation {conversation_id}")
            row["parent_id"] = (
                tree.last_on_path(db, conversation_id)
                if alternative_to is None
                else self._parent_of(db, conversation_id, alternative_to)
            )
            message_id = tree.add(db, row)
            (message,) = rows.select_messages(db, "m.id = ?", [message_id])
        return message

    def choose(self, message_id: int) -> None:
        """Show a message's branch: it and its ancestors become the path on screen (`tree`)."""
        with self._connection.write() as db:
            if not tree.choose(db, message_id):
                raise StorageError(f"no message {message_id}")

    def search(self, text: str, *, limit: int | None = 50) -> list[SearchHit]:
        """Messages of every branch containing every whitespace-separated term of `text`,
        newest first (`matching.search`)."""
        with self._connection.errors():
            return search(self._connection.db, text, limit)

    def count_matches(self, text: str) -> int:
        """How many messages `search(text)` would find without a limit."""
        with self._connection.errors():
            return count_matches(self._connection.db, text)

    def start_reply(
        self,
        conversation_id: int,
        *,
        parent_id: int | None = None,
        engine_run_id: int | None = None,
        flush_interval_s: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        continuing: StoredMessage | None = None,
    ) -> ReplyWriter:
        """A writer for the assistant's next reply in a conversation, or one going on with
        the stored reply `continuing` (cut off or stopped: `ReplyWriter`).

        Args:
            conversation_id: where the reply goes (must exist).
            parent_id: the message it answers (a new alternative beside any earlier reply to
                it); default: the last message on screen.
            engine_run_id: the `record_engine_run` id its measurements belong to.
            flush_interval_s: the most text-arrival time a crash may lose.
            clock: seconds, for the flush interval (tests pass a fake).
        """
        self.get_conversation(conversation_id)
        if parent_id is None:
            with self._connection.errors():
                parent_id = tree.last_on_path(self._connection.db, conversation_id)
        return ReplyWriter(
            self._connection,
            conversation_id,
            parent_id=parent_id,
            engine_run_id=engine_run_id,
            flush_interval_s=flush_interval_s,
            clock=clock,
            continuing=continuing,
        )

    @staticmethod
    def _parent_of(db: Database, conversation_id: int, message_id: int) -> int | None:
        sql = "SELECT parent_id FROM messages WHERE id = ? AND conversation_id = ?"
        found = db.conn.execute(sql, [message_id, conversation_id]).fetchone()
        if found is None:
            raise StorageError(f"no message {message_id} in conversation {conversation_id}")
        return cast(int | None, found[0])

    def _update_conversation(self, conversation_id: int, **changes: Any) -> None:
        with self._connection.write() as db:
            sets = ", ".join(f"{column} = ?" for column in changes) or "id = id"
            sql = f"UPDATE conversations SET {sets} WHERE id = ?"
            if not db.execute(sql, [*changes.values(), conversation_id]).rowcount:
                raise StorageError(f"no conversation {conversation_id}")


_WRITE_ERRORS = ("SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_READONLY")
"""SQLite errors of writing a new file: a failed backup's, not the history's."""
