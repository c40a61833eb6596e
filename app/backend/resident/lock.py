"""The attach lock: the chat window attached to the resident engine holds it (flock).

One window at a time uses the engine; the engine counts as busy (never idle) while a window
holds the lock, so an open chat is not unloaded under its user.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from app.backend.resident.state import LOCK_NAME


class AttachLock:
    """The lock file in the runtime folder; `holder()` names the window that has it."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LOCK_NAME
        self._fd: int | None = None

    def acquire(self, wait_s: float = 2.0) -> bool:
        """Take the lock, retrying for `wait_s` (the engine tests it for a moment each
        second); False when another window holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return False
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def holder(self) -> str:
        """The pid written by the window that holds the lock, or '?'."""
        try:
            return self.path.read_text(encoding="utf-8").strip() or "?"
        except OSError:
            return "?"


def lock_held(folder: Path) -> bool:
    """True while a chat window holds the attach lock."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock taken just now
    return False
