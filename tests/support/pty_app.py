"""`ling-chat --server URL` in a fresh process on a pseudo-terminal, its screen collected."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.timeouts import scaled


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@dataclass
class PtyApp:
    """The app's process, the terminal's side (`leader`: write keys there) and its output."""

    child: subprocess.Popen[bytes]
    leader: int
    screen: bytearray = field(default_factory=bytearray)
    reader: threading.Thread | None = None

    def drain(self) -> None:
        while True:
            try:
                data = os.read(self.leader, 65536)
            except OSError:
                return
            if not data:
                return
            self.screen.extend(data)

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does."""
        os.close(self.leader)
        self.leader = -1
        if self.reader:
            self.reader.join(timeout=scaled(5))


@contextmanager
def app_on_a_pty(server_url: str, data_dir: Path) -> Iterator[PtyApp]:
    """The chat against `server_url` (unproven servers allowed), on a 100x30 terminal; on
    exit it is killed if still running and the terminal closed."""
    config = data_dir / "config.toml"
    config.write_text("")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    env = {
        **os.environ,
        "LING_CHAT_DATA_DIR": str(data_dir),
        "LING_CHAT_CONFIG": str(config),
        "TERM": "xterm-256color",
    }
    child = subprocess.Popen(
        [sys.executable, "-m", "app", "--server", server_url, "--allow-unoptimized"],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    app = PtyApp(child, leader)
    app.reader = threading.Thread(target=app.drain, daemon=True)
    app.reader.start()
    try:
        yield app
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=scaled(30))
        app.reader.join(timeout=scaled(5))
        if app.leader >= 0:
            os.close(app.leader)
