"""The history survives crashes, and every way the file can fail is a one-line error.

These tests use real processes: one SIGKILLed mid-reply, one holding the write lock,
one without write permission, two whose file-size limit makes the disk "full".
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import DatabaseCorrupt, DatabaseLocked, LingChatError, StorageError
from app.storage import ChatStore, MessageStatus
from tests.support.storage import write_locked
from tests.support.timeouts import scaled

Committed = Callable[..., list[dict[str, Any]]]

WRITER = """
import sys, time
from pathlib import Path
from app.storage import ChatStore

store = ChatStore.open(Path(sys.argv[1]))
conversation = store.create_conversation("doomed")
store.add_user_message(conversation.id, "Count for me.")
writer = store.start_reply(conversation.id, flush_interval_s=0.05)
writer.append(reasoning="Plan: count.")
for i in range(10_000_000):
    writer.append(f"w{i} ")
    time.sleep(0.001)
"""

READ_ONLY = """
import os, sys
from pathlib import Path
from app.core.errors import StorageError
from app.storage import ChatStore

if os.geteuid() == 0:  # root ignores file modes: become nobody (modules already loaded)
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
try:
    with ChatStore.open(Path(sys.argv[1])) as store:
        store.create_conversation("should not land")
except StorageError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""

DISK_FULL = """
import resource, signal, sys
from pathlib import Path
from app.core.errors import StorageError
from app.storage import ChatStore

store = ChatStore.open(Path(sys.argv[1]))
conversation = store.get_conversation(1)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, resource.RLIM_INFINITY))
try:
    store.add_user_message(conversation.id, "x" * 1_000_000)  # under the message limit
except StorageError as exc:
    print(f"{type(exc).__name__}: {exc}")
store.add_user_message(conversation.id, "after")  # the store still works
"""

BACKUP_DISK_FULL = """
import resource, signal, sys
from pathlib import Path
from app.core.errors import StorageError
from app.storage import ChatStore

store = ChatStore.open(Path(sys.argv[1]))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
try:
    store.backup(Path(sys.argv[2]))
except StorageError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def one_line(error: LingChatError) -> str:
    text = str(error)
    assert text and "\n" not in text
    return text


def python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=scaled(60)
    )


def test_sigkill_mid_reply_leaves_a_partial_reply_holding_the_flushed_text(
    end_to_end: None, db_path: Path, committed: Committed
) -> None:
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(db_path)])
    seen = ""
    try:
        deadline = time.monotonic() + 30
        while seen.count(" ") < 100:  # a few flushes' worth
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
            if db_path.exists():
                try:
                    rows = committed("SELECT content FROM messages WHERE role = 'assistant'")
                except sqlite3.OperationalError:  # still migrating
                    continue
                seen = rows[0]["content"] if rows else ""
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    with ChatStore.open(db_path) as store:
        (conversation,) = store.list_conversations()
        question, reply = store.messages(conversation.id)
    assert (question.content, question.status) == ("Count for me.", MessageStatus.COMPLETE)
    assert reply.status is MessageStatus.PARTIAL
    assert reply.reasoning == "Plan: count."
    assert reply.content.startswith(seen)
    words = len(reply.content.split())
    assert reply.content == "".join(f"w{i} " for i in range(words))
    assert reply.stats is None and reply.error is None


def test_random_bytes_are_reported_corrupt_and_left_untouched(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    junk = random.Random(7).randbytes(16384)
    db_path.write_bytes(junk)

    with pytest.raises(DatabaseCorrupt) as caught:
        ChatStore.open(db_path)

    assert str(db_path) in one_line(caught.value)
    assert db_path.read_bytes() == junk


def test_a_garbled_header_is_reported_corrupt_and_left_untouched(db_path: Path) -> None:
    with ChatStore.open(db_path) as store:
        store.add_user_message(store.create_conversation().id, "precious")
    damaged = b"NOT SQLITE AT ALL" + db_path.read_bytes()[17:]
    db_path.write_bytes(damaged)

    with pytest.raises(DatabaseCorrupt) as caught:
        ChatStore.open(db_path)

    assert str(db_path) in one_line(caught.value)
    assert db_path.read_bytes() == damaged


def test_damaged_pages_surface_as_corrupt_when_read(db_path: Path) -> None:
    with ChatStore.open(db_path) as store:
        conversation = store.create_conversation()
        for i in range(200):
            store.add_user_message(conversation.id, f"message {i} " + "text " * 100)
    data = bytearray(db_path.read_bytes())
    half = len(data) // 2
    data[half:] = random.Random(3).randbytes(len(data) - half)
    db_path.write_bytes(data)

    with pytest.raises(DatabaseCorrupt) as caught, ChatStore.open(db_path) as store:
        store.messages(conversation.id)
        store.search("message")

    assert str(db_path) in one_line(caught.value)
    assert db_path.read_bytes() == data


def test_a_write_waits_for_the_busy_timeout_then_reports_locked(
    end_to_end: None, db_path: Path
) -> None:
    with ChatStore.open(db_path, busy_timeout_s=0.3) as store:
        with write_locked(db_path):
            assert store.list_conversations() == []  # readers are never blocked (WAL)
            started = time.monotonic()
            with pytest.raises(DatabaseLocked) as caught:
                store.create_conversation("blocked")
            waited = time.monotonic() - started
        assert 0.25 <= waited < 3
        assert str(db_path) in one_line(caught.value)
        assert "0.3 s" in str(caught.value)
        assert [c.title for c in store.list_conversations()] == []
        store.create_conversation("after")  # the lock is gone: writes work again
        assert [c.title for c in store.list_conversations()] == ["after"]


def test_a_finish_that_must_not_wait_fails_at_once_and_keeps_the_busy_timeout(
    end_to_end: None,
    db_path: Path,
) -> None:
    with ChatStore.open(db_path, busy_timeout_s=2.0) as store:
        conversation = store.create_conversation()
        writer = store.start_reply(conversation.id, flush_interval_s=60)
        writer.append("all of it")
        with write_locked(db_path):
            started = time.monotonic()
            with pytest.raises(DatabaseLocked):
                writer.finish(MessageStatus.COMPLETE, wait=False)
            assert time.monotonic() - started < 1.0  # the UI's retries never stall it
            started = time.monotonic()
            with pytest.raises(DatabaseLocked):
                writer.finish(MessageStatus.COMPLETE)
            assert time.monotonic() - started >= 1.9  # the timeout is back for the rest
        reply = writer.finish(MessageStatus.COMPLETE, wait=False)
    assert reply is not None and reply.content == "all of it"


def test_opening_a_new_database_that_another_process_locked_reports_locked(
    end_to_end: None,
    db_path: Path,
) -> None:
    db_path.parent.mkdir(parents=True)
    with write_locked(db_path), pytest.raises(DatabaseLocked) as caught:
        ChatStore.open(db_path, busy_timeout_s=0.2)
    assert str(db_path) in one_line(caught.value)
    ChatStore.open(db_path).close()  # and it migrates once the lock is gone


def test_a_reply_whose_finish_hit_the_lock_can_finish_later(
    end_to_end: None, db_path: Path, committed: Committed
) -> None:
    with ChatStore.open(db_path, busy_timeout_s=0.2) as store:
        conversation = store.create_conversation()
        writer = store.start_reply(conversation.id, flush_interval_s=60)
        writer.append("all of it")
        with write_locked(db_path), pytest.raises(DatabaseLocked):
            writer.finish(MessageStatus.COMPLETE)
        assert committed("SELECT status FROM messages") == [{"status": "partial"}]
        reply = writer.finish(MessageStatus.COMPLETE)
    assert reply is not None and (reply.status, reply.content) == (
        MessageStatus.COMPLETE,
        "all of it",
    )


def test_a_read_only_database_is_a_one_line_storage_error(end_to_end: None) -> None:
    # Not tmp_path: its parents are private to root, and the child may run as nobody.
    folder = Path(tempfile.mkdtemp(prefix="ling-chat-ro-"))
    path = folder / "history.db"
    try:
        with ChatStore.open(path) as store:
            store.create_conversation("kept")
        before = path.read_bytes()
        path.chmod(0o444)
        folder.chmod(0o555)

        result = python(READ_ONLY, str(path))

        assert result.stdout == (
            f"StorageError: cannot write {path}: the file or its folder is read-only\n"
        ), result.stderr
        assert path.read_bytes() == before
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
        for leftover in folder.iterdir():
            leftover.unlink()
        folder.rmdir()


def test_a_full_disk_is_a_one_line_storage_error_and_loses_nothing(
    end_to_end: None, db_path: Path
) -> None:
    with ChatStore.open(db_path) as store:
        store.add_user_message(store.create_conversation().id, "before")

    result = python(DISK_FULL, str(db_path))

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"StorageError: cannot write {db_path}: ")
    assert result.stdout.endswith("(is the disk full?)\n")
    assert result.stdout.count("\n") == 1
    with ChatStore.open(db_path) as store:
        assert [m.content for m in store.messages(1)] == ["before", "after"]


def test_a_backup_on_a_full_disk_names_the_backup_and_leaves_no_part_of_it(
    end_to_end: None, db_path: Path, tmp_path: Path
) -> None:
    with ChatStore.open(db_path) as store:
        for number in range(8):
            store.add_user_message(store.create_conversation().id, f"text {number} " * 20_000)
    backup = tmp_path / "backup.db"

    result = python(BACKUP_DISK_FULL, str(db_path), str(backup))

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"StorageError: cannot write {backup}: ")
    assert result.stdout.endswith("(is the disk full?)\n")
    assert result.stdout.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    with ChatStore.open(db_path) as store:
        store.backup(backup)  # space is free again: the same command now succeeds
    with ChatStore.open(backup) as copy:
        assert len(copy.list_conversations()) == 8


def test_a_folder_that_cannot_be_created_is_a_one_line_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the data folder should be")
    with pytest.raises(StorageError) as caught:
        ChatStore.open(blocker / "history.db")
    assert one_line(caught.value).startswith(f"cannot create {blocker}: ")


@pytest.mark.parametrize("status", [MessageStatus.COMPLETE, MessageStatus.STOPPED])
def test_text_whose_first_commit_hit_the_lock_is_stored_by_finish(
    end_to_end: None, db_path: Path, committed: Committed, status: MessageStatus
) -> None:
    with ChatStore.open(db_path, busy_timeout_s=0.2) as store:
        conversation = store.create_conversation()
        writer = store.start_reply(conversation.id, flush_interval_s=60)
        with write_locked(db_path), pytest.raises(DatabaseLocked):
            writer.append("kept", "thought")
        assert writer.message_id is None
        assert committed("SELECT * FROM messages") == []
        reply = writer.finish(status)
    assert reply is not None
    assert (reply.status, reply.content, reply.reasoning) == (status, "kept", "thought")
    assert committed("SELECT id, status FROM messages") == [{"id": reply.id, "status": status}]


def test_a_flush_after_a_failed_first_commit_creates_the_row(
    end_to_end: None, db_path: Path, committed: Committed
) -> None:
    with ChatStore.open(db_path, busy_timeout_s=0.2) as store:
        conversation = store.create_conversation()
        writer = store.start_reply(conversation.id, flush_interval_s=60)
        with write_locked(db_path), pytest.raises(DatabaseLocked):
            writer.append("kept")
        writer.flush()
    assert committed("SELECT id, status, content FROM messages") == [
        {"id": writer.message_id, "status": "partial", "content": "kept"}
    ]
