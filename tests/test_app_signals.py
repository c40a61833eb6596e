"""SIGTERM and SIGHUP mid-reply: `ling-chat --server` in a fresh process on a pseudo-terminal,
against a test double of an SGLang server whose reply streams slowly.

The reply must be stored as stopped with what arrived, the full-screen UI must leave the
terminal (the alternate screen is switched off last), and the exit status is 128 + signal.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from tests.support.pty_app import app_on_a_pty, wait_for
from tests.support.slow_server import TOKEN, SlowServer
from tests.support.timeouts import scaled

LEAVE_ALT_SCREEN = b"\x1b[?1049l"


@pytest.mark.parametrize(
    ("signum", "window_closed"),
    [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGHUP, True)],
)
def test_a_signal_mid_reply_stores_it_as_stopped_and_restores_the_terminal(
    end_to_end: None, tmp_path: Path, signum: int, window_closed: bool
) -> None:
    """`window_closed`: the terminal hangs up first (reads and writes fail), as when its
    window is closed; the process must still store the reply and exit, not hang."""
    with SlowServer(step_s=0.05) as server, app_on_a_pty(server.url, tmp_path) as app:
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        os.write(app.leader, b"count")
        time.sleep(0.3)
        os.write(app.leader, b"\x13")  # Ctrl+S: send
        wait_for(lambda: server.chat_tokens >= 5, 30, "the reply to stream")
        if window_closed:
            app.hang_up()
        app.child.send_signal(signum)
        status = app.child.wait(timeout=scaled(30))

    assert status == 128 + signum
    if not window_closed:
        name = signal.Signals(signum).name
        assert app.screen.rstrip().endswith(f"ling-chat: stopped by {name}".encode())
        assert LEAVE_ALT_SCREEN in app.screen[app.screen.rindex(b"\x1b[?1049h") :]
    with sqlite3.connect(tmp_path / "history.db") as db:
        (reply, status_text) = db.execute(
            "SELECT content, status FROM messages WHERE role = 'assistant'"
        ).fetchone()
    assert status_text == "stopped"
    assert reply.startswith(TOKEN * 5)
