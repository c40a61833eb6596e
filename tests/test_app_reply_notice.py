"""The finished-reply notice in a real terminal: with `reply_notice = "osc9"` a reply that
ends after the terminal reported it lost focus sends an OSC 9 notification; off (the default)
it sends none."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.support.pty_app import app_on_a_pty, wait_for
from tests.support.slow_server import SlowServer

OSC9 = b"\x1b]9;ling-chat: the reply finished\x07"
FOCUS_OUT = b"\x1b[O"


def replies_done(db_path: Path) -> int:
    if not db_path.exists():
        return 0
    with sqlite3.connect(db_path) as db:
        sql = "SELECT count(*) FROM messages WHERE role = 'assistant' AND status = 'complete'"
        return int(db.execute(sql).fetchone()[0])


@pytest.mark.parametrize(("setting", "notified"), [("osc9", True), (None, False)])
def test_a_reply_ending_while_unfocused_sends_osc9_only_when_asked(
    end_to_end: None, tmp_path: Path, setting: str | None, notified: bool
) -> None:
    env = {"LING_CHAT_REPLY_NOTICE": setting} if setting else {}
    with (
        SlowServer(step_s=0.001) as server,  # a reply of MAX_TOKENS: about 3 s
        app_on_a_pty(
            ["--server", server.url, "--allow-unoptimized"], tmp_path, size=(80, 24), env=env
        ) as app,
    ):
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        os.write(app.leader, b"hello")
        wait_for(lambda: b"hello" in app.screen, 30, "the prompt")
        os.write(app.leader, b"\x13")  # Ctrl+S: send, then leave (a key press is focus)
        wait_for(lambda: b"tok tok" in app.screen, 30, "the reply to stream")
        os.write(app.leader, FOCUS_OUT)
        wait_for(lambda: replies_done(tmp_path / "history.db") == 1, 60, "the reply")
        if notified:
            wait_for(lambda: OSC9 in app.screen, 10, "the notification")
    assert (OSC9 in app.screen) is notified
