"""Ctrl+E in a real terminal: `ling-chat --server` on a pseudo-terminal hands the terminal
to `$EDITOR` (a small real script) on the draft, takes the saved text back into the prompt,
and sends it."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.pty_app import app_on_a_pty, wait_for
from tests.support.slow_server import SlowServer

EDITOR = """#!/bin/sh
# The draft's file is "$1": append to its text, and note whether we had the terminal.
test -t 0 && test -t 1 && echo terminal > "$(dirname "$0")/had-the-terminal"
printf '%s and more from the editor\\n' "$(cat "$1")" > "$1"
"""


def stored_user_messages(db_path: Path) -> list[str]:
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as db:
        return [row[0] for row in db.execute("SELECT content FROM messages WHERE role = 'user'")]


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
def test_ctrl_e_edits_the_draft_in_editor_and_sends_the_saved_text(
    end_to_end: None, tmp_path: Path, size: tuple[int, int]
) -> None:
    editor = tmp_path / "bin" / "editor"
    editor.parent.mkdir()
    editor.write_text(EDITOR)
    editor.chmod(0o755)
    env = {"EDITOR": str(editor), "VISUAL": ""}
    with (
        SlowServer(step_s=0.05) as server,
        app_on_a_pty(
            ["--server", server.url, "--allow-unoptimized"], tmp_path / "data", size=size, env=env
        ) as app,
    ):
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        os.write(app.leader, b"my draft")
        wait_for(lambda: b"my draft" in app.screen, 30, "the draft on screen")
        os.write(app.leader, b"\x05")  # Ctrl+E
        wait_for(lambda: b"from the editor" in app.screen, 30, "the edited draft")
        os.write(app.leader, b"\x13")  # Ctrl+S: send
        db_path = tmp_path / "data" / "history.db"
        wait_for(lambda: stored_user_messages(db_path), 30, "the message to be stored")
    assert stored_user_messages(db_path) == ["my draft and more from the editor"]
    assert (editor.parent / "had-the-terminal").read_text() == "terminal\n"
