"""`ling-chat --server` on a real terminal: a reply cut by its budget is stored as cut off with
its reason, and Ctrl+G continues it on the server (`continue_final_message`) in the same
stored reply."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tests.support.pty_app import app_on_a_pty, wait_for
from tests.support.slow_server import TOKEN, SlowServer

BUDGET = 5


def stored_replies(db_path: Path) -> list[tuple[str, str, str | None]]:
    """(content, status, cut reason) of each stored reply."""
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as db:
        query = "SELECT content, status, cut_reason FROM messages WHERE role = 'assistant'"
        return list(db.execute(query))


def test_a_cut_reply_is_stored_as_cut_and_ctrl_g_continues_it_on_the_server(
    end_to_end: None, tmp_path: Path
) -> None:
    env = {"LING_CHAT_SAMPLING__MAX_NEW_TOKENS": str(BUDGET)}
    db_path = tmp_path / "history.db"
    with (
        SlowServer(step_s=0.01) as server,
        app_on_a_pty(["--server", server.url, "--allow-unoptimized"], tmp_path, env=env) as app,
    ):
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        os.write(app.leader, b"count\x13")  # Ctrl+S: send
        wait_for(lambda: stored_replies(db_path), 30, "the reply to be stored")
        cut = (TOKEN * BUDGET, "cut", f"the reply budget of {BUDGET} tokens")
        wait_for(lambda: stored_replies(db_path) == [cut], 30, "the reply stored as cut off")
        wait_for(lambda: b"cut off" in app.screen, 30, "the cut reply's footer")
        os.write(app.leader, b"\x07")  # Ctrl+G: continue
        twice = (TOKEN * BUDGET * 2, "cut", f"the reply budget of {BUDGET} tokens")
        wait_for(lambda: stored_replies(db_path) == [twice], 30, "the reply continued")
    continued = server.chat_bodies[-1]
    assert continued["continue_final_message"] is True
    assert continued["messages"][-1] == {"role": "assistant", "content": TOKEN * BUDGET}
