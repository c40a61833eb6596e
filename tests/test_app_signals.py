"""SIGTERM and SIGHUP mid-reply: `ling-chat --server` in a fresh process on a pseudo-terminal,
against a test double of an SGLang server whose reply streams slowly.

The reply must be stored as stopped with what arrived, the full-screen UI must leave the
terminal (the alternate screen is switched off last), and the exit status is 128 + signal.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import sqlite3
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from tests.support.slow_server import TOKEN, SlowServer
from tests.support.timeouts import scaled

pytestmark = pytest.mark.slow  # end to end: Pilot or a subprocess

LEAVE_ALT_SCREEN = b"\x1b[?1049l"


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("signum", "window_closed"),
    [(signal.SIGTERM, False), (signal.SIGHUP, False), (signal.SIGHUP, True)],
)
def test_a_signal_mid_reply_stores_it_as_stopped_and_restores_the_terminal(
    tmp_path: Path, signum: int, window_closed: bool
) -> None:
    """`window_closed`: the terminal hangs up first (reads and writes fail), as when its
    window is closed; the process must still store the reply and exit, not hang."""
    screen = bytearray()
    config = tmp_path / "config.toml"
    config.write_text("")
    with SlowServer(step_s=0.05) as server:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        env = {
            **os.environ,
            "LING_CHAT_DATA_DIR": str(tmp_path),
            "LING_CHAT_CONFIG": str(config),
            "TERM": "xterm-256color",
        }
        child = subprocess.Popen(
            [sys.executable, "-m", "app", "--server", server.url, "--allow-unoptimized"],
            stdin=follower,
            stdout=follower,
            stderr=follower,
            env=env,
            start_new_session=True,
        )
        os.close(follower)

        def drain() -> None:
            while True:
                try:
                    data = os.read(leader, 65536)
                except OSError:
                    return
                if not data:
                    return
                screen.extend(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            wait_for(lambda: b"Ask Ling" in screen, 60, "the chat")
            os.write(leader, b"count")
            time.sleep(0.3)
            os.write(leader, b"\x13")  # Ctrl+S: send
            wait_for(lambda: server.chat_tokens >= 5, 30, "the reply to stream")
            if window_closed:
                os.close(leader)
                reader.join(timeout=scaled(5))
            child.send_signal(signum)
            status = child.wait(timeout=scaled(30))
        finally:
            if child.poll() is None:
                child.kill()
            reader.join(timeout=scaled(5))
            if not window_closed:
                os.close(leader)

    assert status == 128 + signum
    if not window_closed:
        name = signal.Signals(signum).name
        assert screen.rstrip().endswith(f"ling-chat: stopped by {name}".encode())
        assert LEAVE_ALT_SCREEN in screen[screen.rindex(b"\x1b[?1049h") :]
    with sqlite3.connect(tmp_path / "history.db") as db:
        (reply, status_text) = db.execute(
            "SELECT content, status FROM messages WHERE role = 'assistant'"
        ).fetchone()
    assert status_text == "stopped"
    assert reply.startswith(TOKEN * 5)
