"""A history on read-only storage, through the real CLI: the commands that read work, those
that change it say `read-only` in one line, and the file stays byte for byte as it was."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_utils import Database

from app.cli import main
from app.core.errors import StorageError
from app.settings import load_settings
from app.storage import ChatStore, MessageStatus
from app.storage.schema import MIGRATIONS
from tests.support.read_only import made_read_only
from tests.support.storage import STATS

READ_ONLY = (
    "is read-only (the file or its folder): reading works (history, history show/stats, "
    "export, history backup), changing it does not"
)


@pytest.fixture
def history() -> Path:
    """Two conversations, one with a measured reply, closed cleanly (no -wal, no -shm)."""
    path = load_settings().db_path  # LING_CHAT_DATA_DIR from the isolated_dirs fixture
    with ChatStore.open(path) as store:
        pasta = store.create_conversation("Pasta")
        store.add_user_message(pasta.id, "How long do I boil spaghetti?")
        writer = store.start_reply(pasta.id)
        writer.append(answer="About 9 minutes.")
        writer.finish(MessageStatus.COMPLETE, STATS)
        store.create_conversation("Taxes")
    return path


@pytest.fixture(params=["file", "folder"])
def read_only(request: pytest.FixtureRequest, history: Path) -> Iterator[Path]:
    """The history with its file alone, or its whole folder, read-only."""
    with made_read_only(history if request.param == "file" else history.parent):
        yield history


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_reading_commands_work_on_a_read_only_history(
    read_only: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = read_only.read_bytes()
    status, out, _ = run(capsys, "history")
    assert status == 0 and out.splitlines()[1].endswith("Taxes")
    status, out, _ = run(capsys, "history", "show", "1")
    assert status == 0 and "About 9 minutes." in out
    status, out, _ = run(capsys, "history", "stats")
    assert status == 0 and "1 reply" in out
    exported = tmp_path / "all.json"
    assert run(capsys, "export", "-o", str(exported))[0] == 0
    titles = [c["title"] for c in json.loads(exported.read_text())["conversations"]]
    assert titles == ["Pasta", "Taxes"]
    copy = tmp_path / "copy.db"
    assert run(capsys, "history", "backup", str(copy)) == (
        0,
        f"Backed up 2 conversations to {copy}\n",
        "",
    )
    with ChatStore.open(copy) as backup:
        assert [c.title for c in backup.list_conversations()] == ["Taxes", "Pasta"]
    assert read_only.read_bytes() == before
    assert sorted(p.name for p in read_only.parent.iterdir()) == [read_only.name]


@pytest.mark.parametrize("argv", [["history", "archive", "1"], ["import", "IMPORT"]])
def test_changing_a_read_only_history_is_one_line_that_says_so(
    read_only: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    exported = tmp_path / "all.jsonl"
    assert run(capsys, "export", "-o", str(exported))[0] == 0
    before = read_only.read_bytes()
    status, out, err = run(capsys, *(str(exported) if a == "IMPORT" else a for a in argv))
    assert status == 1 and out == ""
    assert err == f"ling-chat: error: {read_only} {READ_ONLY}\n"
    assert read_only.read_bytes() == before


def test_the_chat_store_refuses_to_open_a_read_only_history_for_writing(
    read_only: Path,
) -> None:
    with pytest.raises(StorageError, match="is read-only"):
        ChatStore.open(read_only)


def test_a_read_only_history_an_index_behind_still_reads(
    history: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A history written before the import's index (m003) reads without it; one that lacks
    a migration reading needs is refused in one line."""
    with Database(history) as db:
        db.execute("DROP INDEX idx_conversations_created_at_title")
        db.execute("DELETE FROM _sqlite_migrations WHERE name = 'm003_conversation_key_index'")
        db.conn.commit()
    with made_read_only(history.parent):
        status, out, _ = run(capsys, "history")
    assert status == 0 and "Taxes" in out
    with Database(history) as db:
        db.execute("DELETE FROM _sqlite_migrations WHERE name = 'm002_counter_names'")
        db.conn.commit()
    with made_read_only(history.parent):
        status, _, err = run(capsys, "history")
    assert status == 1
    assert err == (
        f"ling-chat: error: {history} is read-only, and reading it needs m002_counter_names, "
        "which writes it: open it once where it can be written\n"
    )
    assert [m.name for m in MIGRATIONS.pending(Database(history))] == [
        "m002_counter_names",
        "m003_conversation_key_index",
    ]


def test_a_read_only_folder_whose_last_changes_are_in_the_log_is_one_line(
    history: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Copied while open, the history's last changes sit in its -wal file; SQLite reads
    them only where it may add the -shm file, which a read-only folder refuses."""
    copy = tmp_path / "copy" / history.name
    copy.parent.mkdir()
    with ChatStore.open(history) as store:
        store.create_conversation("only in the log")
        shutil.copy(history, copy)
        shutil.copy(history.with_name(f"{history.name}-wal"), copy.with_name(f"{copy.name}-wal"))
    with made_read_only(copy.parent):
        status, _, err = run(capsys, "history", "--data-dir", str(copy.parent))
    assert status == 1
    assert err == (
        f"ling-chat: error: {copy} is read-only and its last changes are still in "
        f"{copy.name}-wal, which SQLite reads only where it may add a shared-memory file: "
        "copy the folder somewhere writable to read it whole\n"
    )
