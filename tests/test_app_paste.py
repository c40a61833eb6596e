"""A paste holding terminal escapes, in a real terminal: `ling-chat --server` on a
pseudo-terminal gets a bracketed paste and sends (and stores) exactly what was pasted."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tests.support.pty_app import app_on_a_pty, wait_for
from tests.support.slow_server import SlowServer

PASTED = "before \x1b[31mred\x1b[0m \x1b]0;title\x07 after"


def stored_user_messages(db_path: Path) -> list[str]:
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as db:
        return [row[0] for row in db.execute("SELECT content FROM messages WHERE role = 'user'")]


def test_a_pasted_escape_is_sent_as_pasted(end_to_end: None, tmp_path: Path) -> None:
    with (
        SlowServer(step_s=0.05) as server,
        app_on_a_pty(["--server", server.url, "--allow-unoptimized"], tmp_path) as app,
    ):
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        os.write(app.leader, f"\x1b[200~{PASTED}\x1b[201~".encode())
        wait_for(lambda: "␛".encode() in app.screen, 30, "the paste on screen")
        os.write(app.leader, b"\x13")  # Ctrl+S: send
        db_path = tmp_path / "history.db"
        wait_for(lambda: stored_user_messages(db_path), 30, "the message to be stored")
        assert stored_user_messages(db_path) == [PASTED]
        assert b"\x1b]0;title" not in app.screen
