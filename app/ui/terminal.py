"""The terminal the app draws on: Textual's Linux driver, safe when the terminal hangs up or
stops reading.

Textual writes the screen from a thread fed by a queue of 30 writes. When the terminal hung
up (its window closed), that thread died on the first failed write, the queue filled, and
the app's loop blocked on it for good, its signal handlers with it; a terminal that stops
reading blocked it too. Here the thread writes to `TerminalOutput`: a non-blocking copy of
the terminal that waits for room in short polls. A terminal that hung up (a write fails, or
the terminal says so) drops every later write and posts `TerminalHungUp`; `give_up` drops
them for one that does not read. Either way the loop goes on.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import sys
import termios
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message

if TYPE_CHECKING:
    from textual.app import App

POLL_S: Final = 0.1
"""How long a write waits for room before it looks again whether to give up."""
WATCH_S: Final = 0.5
"""How often the terminal is asked whether it hung up (reading a hung-up terminal only ends)."""


class TerminalHungUp(Message):
    """The terminal hung up: nothing can be drawn or read any more."""


class TerminalOutput:
    """The file Textual's writer thread writes the screen to."""

    def __init__(self, file: Any, on_hang_up: Callable[[], None]) -> None:
        self._file = file
        self._encoding: str = getattr(file, "encoding", None) or "utf-8"
        self._errors: str = getattr(file, "errors", None) or "replace"
        self._fd = _non_blocking_copy(file.fileno())
        self._dropped = threading.Event()
        self._on_hang_up = on_hang_up

    def give_up(self) -> None:
        """Drop every write from now on (the one waiting for room too)."""
        self._dropped.set()

    def write(self, text: str) -> int:
        """Write all of `text`, waiting for room, unless writes are dropped meanwhile."""
        data = memoryview(text.encode(self._encoding, self._errors))
        while data and not self._dropped.is_set():
            try:
                data = data[os.write(self._fd, data) :]
            except BlockingIOError:
                select.select([], [self._fd], [], POLL_S)
            except OSError:  # EIO: hung up; EPIPE and others: nothing can be shown either
                self._dropped.set()
                self._on_hang_up()
        return len(text)

    def flush(self) -> None:
        """Nothing to flush: every write goes straight to the terminal."""

    def fileno(self) -> int:
        return int(self._file.fileno())

    def close(self) -> None:
        """Close the copy (the terminal itself stays open)."""
        if self._fd != self.fileno():
            with contextlib.suppress(OSError):
                os.close(self._fd)


def _non_blocking_copy(fd: int) -> int:
    """A non-blocking descriptor of the terminal behind `fd`, opened anew so that the flag
    leaves `fd` (which the shell shares) blocking; `fd` itself when it is no terminal."""
    try:
        return os.open(os.ttyname(fd), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:
        return fd


def _to_devnull(fds: list[int]) -> None:
    nowhere = os.open(os.devnull, os.O_RDWR)
    for fd in fds:
        os.dup2(nowhere, fd)
    os.close(nowhere)


class TerminalDriver(LinuxDriver):
    """Textual's `LinuxDriver`, writing through `TerminalOutput` and watching for a hang-up."""

    def __init__(self, app: App[Any], **options: Any) -> None:
        super().__init__(app, **options)
        self.output = TerminalOutput(sys.__stderr__, self.hang_up)
        self._file = self.output  # type: ignore[assignment]  # Textual's writer writes here
        self._hung_up = threading.Event()
        self._closed = threading.Event()
        self._watcher: threading.Thread | None = None

    def start_application_mode(self) -> None:
        super().start_application_mode()
        if self._watcher is None:  # once: a resume after `suspend_application_mode` keeps it
            self._watcher = threading.Thread(target=self._watch, name="terminal-watch")
            self._watcher.daemon = True
            self._watcher.start()

    def suspend_application_mode(self) -> None:
        """Hand the terminal over (`App.suspend`, for `$EDITOR`): as Textual's, but only its
        writer thread stops; the output and the hang-up watch stay for the resume (`close`
        would end them)."""
        self.stop_application_mode()
        super().close()

    def check_hang_up(self) -> bool:
        """Whether the terminal hung up (`hang_up` is called if so); any thread."""
        if not self._hung_up.is_set():
            try:
                termios.tcgetattr(self.fileno)
            except termios.error as error:
                if error.args[0] == errno.EIO:  # ENOTTY: input that is no terminal
                    self.hang_up()
        return self._hung_up.is_set()

    def give_up_output(self) -> None:
        """The terminal takes no writes: draw nothing more, and point the standard streams
        that are terminals at /dev/null, so that what is printed at exit does not wait."""
        self.output.give_up()
        _to_devnull([fd for fd in (1, 2) if os.isatty(fd)])

    def hang_up(self) -> None:
        """The terminal is gone: drop every write, stop reading, point the standard streams
        at /dev/null (what is printed at exit goes nowhere, without failing), and post
        `TerminalHungUp` to the app. Once; any thread."""
        if self._hung_up.is_set():
            return
        self._hung_up.set()
        self.output.give_up()
        self.exit_event.set()  # Textual's input thread: a hung-up terminal reads as endless EOF
        _to_devnull([0, 1, 2])
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._app.post_message, TerminalHungUp())

    def close(self) -> None:
        self._closed.set()
        super().close()
        self.output.close()

    def _watch(self) -> None:
        """Ask the terminal every WATCH_S whether it hung up, until it did or the app closed."""
        while not self._closed.wait(WATCH_S):
            if self.check_hang_up():
                return
