"""The unsaved-replies file: private, never written through a link, never over a file it did
not write."""

from __future__ import annotations

import stat
import time
from pathlib import Path

import pytest

from app.core.chat import ChatMessage, Role, Sampling
from app.core.errors import ExportError
from app.storage import ChatStore
from app.ui.recovery import RecoveryFile
from app.ui.reply import ReplyRequest, ReplyRun


@pytest.fixture
def runs(tmp_path: Path) -> list[ReplyRun]:
    """One reply with text that the history has not taken."""
    store = ChatStore.open(tmp_path / "history.db")
    chat = store.create_conversation("t")
    request = ReplyRequest(chat.id, (ChatMessage(Role.USER, "what is kept?"),), Sampling())
    run = ReplyRun(request, store.start_reply(chat.id), time.perf_counter)
    run.answer = "this answer"
    yield [run]
    store.close()


def folders(tmp_path: Path, *names: str) -> list[Path]:
    found = [tmp_path / name for name in names]
    for folder in found:
        folder.mkdir()
    return found


def test_the_file_is_private_and_rewritten_in_place(tmp_path: Path, runs: list[ReplyRun]) -> None:
    (first,) = folders(tmp_path, "data")
    recovery = RecoveryFile(first / "history.db", [first])
    path = recovery.keep(runs)
    assert path.parent == first and stat.S_IMODE(path.stat().st_mode) == 0o600
    runs[0].answer = "this answer, longer"
    assert recovery.keep(runs) == path  # its own file: replaced
    assert "this answer, longer" in path.read_text()


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_planted_at_its_name_is_left_alone_and_the_next_folder_used(
    tmp_path: Path, runs: list[ReplyRun], dangling: bool
) -> None:
    shared, home = folders(tmp_path, "shared", "home")
    recovery = RecoveryFile(shared / "history.db", [shared, home])
    victim = tmp_path / "victim"
    if not dangling:
        victim.write_text("keep")
    planted = shared / recovery.name
    planted.symlink_to(victim)

    path = recovery.keep(runs)

    assert path == home / recovery.name
    assert "this answer" in path.read_text()
    assert planted.is_symlink()
    assert victim.read_text() == "keep" if not dangling else not victim.exists()


def test_a_file_already_at_its_name_is_not_overwritten(
    tmp_path: Path, runs: list[ReplyRun]
) -> None:
    (only,) = folders(tmp_path, "only")
    recovery = RecoveryFile(only / "history.db", [only])
    (only / recovery.name).write_text("another session's replies")
    with pytest.raises(ExportError, match="exists already"):
        recovery.keep(runs)
    assert (only / recovery.name).read_text() == "another session's replies"
