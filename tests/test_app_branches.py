"""The branch keys in a real terminal: `ling-chat --server` on a pseudo-terminal of 80x24 and
100x30 gets Ctrl+R, Alt+Left/Right, Alt+Up and F4 as a terminal sends them, and the history
file keeps every alternative and the one on screen."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.pty_app import app_on_a_pty, wait_for
from tests.support.slow_server import SlowServer

ALT_LEFT, ALT_RIGHT, ALT_UP = b"\x1b[1;3D", b"\x1b[1;3C", b"\x1b[1;3A"
F4, CTRL_R, CTRL_S = b"\x1bOS", b"\x12", b"\x13"


def rows(db_path: Path) -> list[tuple[str, str, int | None, int]]:
    """(role, status, parent_id, chosen) of every stored message, oldest first."""
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as db:
        sql = "SELECT role, status, parent_id, chosen FROM messages ORDER BY id"
        return list(db.execute(sql))


def settled(db_path: Path, count: int) -> bool:
    """`count` messages stored, none still streaming."""
    found = rows(db_path)
    return len(found) == count and all(status != "partial" for _, status, _, _ in found)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
def test_the_branch_keys_work_in_a_real_terminal(
    end_to_end: None, tmp_path: Path, size: tuple[int, int]
) -> None:
    db_path = tmp_path / "history.db"
    with (
        SlowServer(step_s=0.001) as server,
        app_on_a_pty(["--server", server.url, "--allow-unoptimized"], tmp_path, size=size) as app,
    ):
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        os.write(app.leader, b"hi" + CTRL_S)
        wait_for(lambda: settled(db_path, 2), 60, "the first reply")
        os.write(app.leader, CTRL_R)
        wait_for(lambda: settled(db_path, 3), 60, "the regenerated reply")
        assert [chosen for *_, chosen in rows(db_path)] == [1, 0, 1]
        os.write(app.leader, ALT_LEFT)
        wait_for(lambda: [c for *_, c in rows(db_path)] == [1, 1, 0], 30, "Alt+Left")
        os.write(app.leader, ALT_RIGHT)
        wait_for(lambda: [c for *_, c in rows(db_path)] == [1, 0, 1], 30, "Alt+Right")
        os.write(app.leader, ALT_UP)  # the question: F4 edits it
        os.write(app.leader, F4)
        wait_for(lambda: b"send as a new branch" in app.screen, 30, "the edit")
        os.write(app.leader, b"!" + CTRL_S)
        wait_for(lambda: settled(db_path, 5), 60, "the edit's reply")
    assert rows(db_path) == [
        ("user", "complete", None, 0),
        ("assistant", "complete", 1, 0),
        ("assistant", "complete", 1, 1),
        ("user", "complete", None, 1),
        ("assistant", "complete", 4, 1),
    ]
    with sqlite3.connect(db_path) as db:
        questions = [
            row[0] for row in db.execute("SELECT content FROM messages WHERE role = 'user'")
        ]
    assert questions == ["hi", "hi!"]
