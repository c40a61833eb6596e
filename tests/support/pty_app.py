"""`ling-chat` in a fresh process on a pseudo-terminal, its screen collected.

The terminal's side can stop reading (a terminal that hangs) or close (a window closed);
standard input can be /dev/null and standard output a pipe nobody reads.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.timeouts import scaled

LING_CHAT = (sys.executable, "-m", "app")
ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"


def engine_double_chat(work: Path) -> tuple[tuple[str, ...], list[str], dict[str, str]]:
    """`ling-chat --model` with SGLang's test double as the in-process engine, its scheduler
    double a child process as SGLang's is, a reply chunk every 0.5 s: the program, its
    arguments and its environment (a model folder is made in `work`)."""
    model = work / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    env = {
        "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)]),
        "ENGINE_DOUBLE_SCHEDULER": "1",
        "ENGINE_DOUBLE_CHUNK_S": "0.5",
    }
    return (sys.executable, str(DOUBLE / "cli_session.py")), ["--model", str(model)], env


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
    reading: threading.Event = field(default_factory=threading.Event)

    def drain(self) -> None:
        while self.reading.is_set():
            try:
                data = os.read(self.leader, 65536)
            except OSError:
                return
            if not data:
                return
            self.screen.extend(data)

    def stop_reading(self) -> None:
        """Stop reading the terminal, as a hung terminal does: the app's writes fill it up."""
        self.reading.clear()

    def end_by(self, cause: str) -> None:
        """`window`: close the terminal (`hang_up`); else send the signal named (`SIGTERM`)."""
        if cause == "window":
            self.hang_up()
        else:
            self.child.send_signal(signal.Signals[cause])

    def hang_up(self) -> None:
        """Close the terminal, as closing its window does: the kernel sends SIGHUP to the
        app (its session's leader here), and the shell or tmux that ran it in a real window
        sends SIGHUP to its whole process group (SGLang's processes too)."""
        os.close(self.leader)
        self.leader = -1
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.child.pid, signal.SIGHUP)
        if self.reader:
            self.reader.join(timeout=scaled(5))


def _take_the_terminal() -> None:
    """In the child, a session leader: the terminal on stderr becomes its controlling one, so
    closing the terminal sends it SIGHUP as closing a window does."""
    fcntl.ioctl(2, termios.TIOCSCTTY, 0)


@contextmanager
def app_on_a_pty(
    args: Sequence[str],
    data_dir: Path,
    *,
    program: Sequence[str] = LING_CHAT,
    size: tuple[int, int] = (100, 30),
    stdin_null: bool = False,
    stdout_to_closed_pipe: bool = False,
    env: Mapping[str, str] | None = None,
) -> Iterator[PtyApp]:
    """`program ARGS` with its data in `data_dir`, on a terminal of `size` (columns, rows)
    that is its controlling terminal; on exit it is killed if still running and the
    terminal closed."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config = data_dir / "config.toml"
    config.touch()
    leader, follower = pty.openpty()
    columns, rows = size
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    environment = {
        **os.environ,
        "LING_CHAT_DATA_DIR": str(data_dir),
        "LING_CHAT_CONFIG": str(config),
        "TERM": "xterm-256color",
        **(env or {}),
    }
    stdout: int = follower
    if stdout_to_closed_pipe:
        unread, stdout = os.pipe()
        os.close(unread)
    child = subprocess.Popen(
        [*program, *args],
        stdin=subprocess.DEVNULL if stdin_null else follower,
        stdout=stdout,
        stderr=follower,
        env=environment,
        start_new_session=True,
        preexec_fn=_take_the_terminal,
    )
    os.close(follower)
    if stdout != follower:
        os.close(stdout)
    app = PtyApp(child, leader)
    app.reading.set()
    app.reader = threading.Thread(target=app.drain, daemon=True)
    app.reader.start()
    try:
        yield app
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=scaled(30))
        app.reading.clear()
        if app.leader >= 0:
            os.close(app.leader)
        app.reader.join(timeout=scaled(5))
