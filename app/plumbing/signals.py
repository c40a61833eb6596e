"""One handler per signal for the whole process, calling every subscriber in turn.

`signal.signal` keeps one handler per signal: two engines that each installed their own
would leave only the last one told when a child dies. Here each subscribes instead.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType


class SignalDispatcher:
    """Subscribers per signal; the process's handler is installed from the main thread."""

    def __init__(self) -> None:
        self._subscribers: dict[int, tuple[Callable[[], None], ...]] = {}
        self._installed: set[int] = set()
        self._lock = threading.Lock()

    def subscribe(self, signum: int, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback` on each `signum` from now on; returns the unsubscribe function.

        The handler can only be installed from the main thread: a subscription from another
        thread waits for one from the main thread.
        """
        with self._lock:
            self._subscribers[signum] = (*self._subscribers.get(signum, ()), callback)
            on_main = threading.current_thread() is threading.main_thread()
            if signum not in self._installed and on_main:
                signal.signal(signum, self._dispatch)
                self._installed.add(signum)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers[signum] = tuple(
                    known for known in self._subscribers.get(signum, ()) if known is not callback
                )

        return unsubscribe

    def _dispatch(self, signum: int, frame: FrameType | None) -> None:
        # Runs between two bytecodes of the main thread, which may hold the lock: a
        # subscription replaces the tuple, so reading it needs no lock.
        for callback in self._subscribers.get(signum, ()):
            callback()


DISPATCHER = SignalDispatcher()
"""The process's one dispatcher."""
