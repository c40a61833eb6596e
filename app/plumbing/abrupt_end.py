"""Ending the process at once when its own way out cannot finish, leaving nothing behind.

A part that would leave something behind a process that ends without running its `finally`
blocks (an engine's processes, a temporary folder) registers how to undo it while it holds
it; `end_now` undoes all of them, logs why, and exits.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable
from typing import NoReturn

logger = logging.getLogger(__name__)

_undo: dict[int, Callable[[], None]] = {}
_ids = itertools.count()
_lock = threading.Lock()


def on_abrupt_end(undo: Callable[[], None]) -> Callable[[], None]:
    """Run `undo` if the process has to end at once; returns the function that forgets it."""
    with _lock:
        key = next(_ids)
        _undo[key] = undo

    def forget() -> None:
        with _lock:
            _undo.pop(key, None)

    return forget


def end_now(status: int, reason: str) -> NoReturn:
    """Undo what is registered, newest first (each failure logged), then exit with `status`."""
    logger.error("ending at once: %s", reason)
    with _lock:
        undos = list(reversed(_undo.values()))
    for undo in undos:
        try:
            undo()
        except Exception:  # noqa: BLE001 - the next one must still run
            logger.exception("undoing %r at the abrupt end failed", undo)
    for handler in logging.getLogger().handlers:
        handler.flush()
    os._exit(status)
