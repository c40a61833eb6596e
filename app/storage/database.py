"""Opening the history file safely, and turning SQLite failures into one-line StorageErrors."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from app import __version__
from app.core.errors import DatabaseCorrupt, DatabaseLocked, StorageError
from app.files import private_dir, private_file
from app.storage.schema import MIGRATIONS, READ_WITHOUT, unknown_migrations


def utc_now() -> str:
    """The current time as an ISO-8601 UTC string with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


class Connection:
    """One SQLite connection to the history file, with its error translation.

    Durability: WAL journal with `synchronous=FULL`, so every committed transaction
    survives a killed process (and a power cut). Use it on the thread that opened it.

    A history whose file or folder cannot be written (`writable`) opens only `read_only`:
    SQLite's `mode=ro` and, when no write-ahead log holds changes (a history closed
    cleanly), `immutable=1`, which reads the file as it is and adds no file beside it;
    every write then fails as read-only.
    """

    def __init__(self, path: Path, busy_timeout_s: float, *, read_only: bool = False) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self.read_only = read_only
        if read_only:
            self.db = Database(self._connect_read_only(), execute_plugins=False)
            return
        if not writable(path):
            raise StorageError(f"{path} is read-only (the file or its folder): {READ_ONLY_HINT}")
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
                    raise StorageError(_newer(path, newer))
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

    def _connect_read_only(self) -> sqlite3.Connection:
        """The file opened read-only, its schema checked; nothing is ever written.

        Raises:
            StorageError: it cannot be read, is no database, needs a migration that reading
                cannot do without, or has a write-ahead log SQLite cannot read from here.
        """
        path = self.path
        uri = path.absolute().as_uri()
        wal = path.with_name(f"{path.name}-wal")
        with self.errors():
            if not (wal.exists() and wal.stat().st_size):  # the file holds it all: as it is
                conn = self._open_checked(f"{uri}?mode=ro&immutable=1")
            else:
                try:
                    conn = self._open_checked(f"{uri}?mode=ro")
                except sqlite3.OperationalError as exc:
                    if getattr(exc, "sqlite_errorname", "") != "SQLITE_CANTOPEN":
                        raise
                    raise StorageError(
                        f"{path} is read-only and its last changes are still in {wal.name}, "
                        "which SQLite reads only where it may add a shared-memory file: copy "
                        "the folder somewhere writable to read it whole"
                    ) from exc
        try:
            with self.errors():
                db = Database(conn, execute_plugins=False)
                if newer := unknown_migrations(db):
                    raise StorageError(_newer(path, newer))
                needed = [m.name for m in MIGRATIONS.pending(db) if m.name not in READ_WITHOUT]
                if needed:
                    raise StorageError(
                        f"{path} is read-only, and reading it needs {', '.join(needed)}, which "
                        "writes it: open it once where it can be written"
                    )
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_checked(self, uri: str) -> sqlite3.Connection:
        """A read-only connection to `uri` whose header and schema were read (`mode=ro`:
        the history is never written; `VACUUM INTO` still copies it)."""
        conn = sqlite3.connect(uri, uri=True, timeout=self.busy_timeout_s)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

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
            return StorageError(f"{path} is read-only (the file or its folder): {READ_ONLY_HINT}")
        if name == "SQLITE_FULL" or name.startswith("SQLITE_IOERR"):
            return StorageError(f"cannot write {path}: {exc} (is the disk full?)")
        if name.startswith("SQLITE_CANTOPEN"):
            return StorageError(f"cannot open {path}: {exc}")
        return StorageError(f"{path}: {exc}")


READ_ONLY_HINT = (
    "reading works (history, history show/stats, export, history backup), changing it does not"
)
"""What a read-only history still allows, for the line that refuses a change."""


def writable(path: Path) -> bool:
    """Whether the history at `path` can be written: the file, if it exists, and its folder
    (where SQLite keeps its journal), if that exists (a missing one is created)."""
    folder = path.parent
    if path.exists() and not os.access(path, os.W_OK):
        return False
    return not folder.is_dir() or os.access(folder, os.W_OK | os.X_OK)


def _newer(path: Path, names: list[str]) -> str:
    return (
        f"{path} was written by a newer ling-chat (its schema has {', '.join(names)}, which "
        f"ling-chat {__version__} does not know); it was left untouched: upgrade ling-chat "
        "to open it"
    )
