"""Opening the history file safely, and turning SQLite failures into one-line StorageErrors."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from app import __version__
from app.core.errors import DatabaseCorrupt, DatabaseLocked, StorageError
from app.files import private_dir, private_file
from app.storage.schema import MIGRATIONS, unknown_migrations


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Connection:
    """One SQLite connection to the history file, with its error translation.

    Durability: WAL journal with `synchronous=FULL`, so every committed transaction
    survives a killed process (and a power cut). Use it on the thread that opened it.
    """

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        try:
            private_dir(path.parent)
        except OSError as exc:
            raise StorageError(f"cannot create {path.parent}: {exc.strerror}") from exc
        try:
            private_file(path)  # SQLite gives the -wal and -shm files the same mode
        except IsADirectoryError:
            pass  # SQLite's own error names it
        except OSError as exc:
            raise StorageError(f"cannot create {path}: {exc.strerror}") from exc
        with self.errors():
            conn = sqlite3.connect(path, timeout=busy_timeout_s)
        try:
            with self.errors():
                self.db = Database(conn, execute_plugins=False)
                # Read the header and schema before anything can write: a file that is no
                # database, or whose schema is damaged, fails here and stays untouched.
                self.db.execute("SELECT count(*) FROM sqlite_master").fetchone()
                if newer := unknown_migrations(self.db):
                    raise StorageError(
                        f"{path} was written by a newer ling-chat (its schema has "
                        f"{', '.join(newer)}, which ling-chat {__version__} does not know); "
                        "it was left untouched: upgrade ling-chat to open it"
                    )
                self.db.enable_wal()
                self.db.execute("PRAGMA synchronous = FULL")
                self.db.execute("PRAGMA foreign_keys = ON")
                # Deleted rows are overwritten with zeros, not left in free pages.
                self.db.execute("PRAGMA secure_delete = ON")
                if MIGRATIONS.pending(self.db):
                    with self.write():  # under the write lock: one process migrates
                        MIGRATIONS.apply(self.db)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Close the connection (uncommitted work is rolled back)."""
        self.db.close()

    @contextmanager
    def errors(self) -> Iterator[None]:
        """Translate any sqlite3 error raised inside into a one-line StorageError."""
        try:
            yield
        except sqlite3.Error as exc:
            raise self.describe(exc) from exc

    @contextmanager
    def write(self, *, wait: bool = True) -> Iterator[Database]:
        """A write transaction taken up front (`BEGIN IMMEDIATE`), committed on success.

        Waiting for the write lock up front means a busy database costs the busy timeout
        once, and a transaction that read first never fails on a stale snapshot. With
        `wait=False` a locked database fails at once (a retry that must not stall the UI).
        """
        with self.errors():
            if not wait:
                self.db.execute("PRAGMA busy_timeout = 0")
            try:
                self.db.execute("BEGIN IMMEDIATE")
            finally:
                if not wait:
                    self.db.execute(f"PRAGMA busy_timeout = {round(self.busy_timeout_s * 1000)}")
            try:
                yield self.db
                self.db.commit()
            except BaseException:
                self.db.rollback()
                raise

    def describe(self, exc: sqlite3.Error, path: Path | None = None) -> StorageError:
        """The one-line error for `exc`, naming `path` (default: this database's file)."""
        name = getattr(exc, "sqlite_errorname", "")
        path = path or self.path
        if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")):
            return DatabaseCorrupt(
                f"{path} is not a usable SQLite database ({exc}); it was left untouched: "
                "move it away to start a new history"
            )
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return DatabaseLocked(
                f"{path} is locked by another process (waited {self.busy_timeout_s:g} s); "
                "close other ling-chat windows and try again"
            )
        if name.startswith("SQLITE_READONLY"):
            return StorageError(f"cannot write {path}: the file or its folder is read-only")
        if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
            return StorageError(f"cannot write {path}: {exc} (is the disk full?)")
        if name.startswith("SQLITE_CANTOPEN"):
            return StorageError(f"cannot open {path}: {exc}")
        return StorageError(f"{path}: {exc}")
