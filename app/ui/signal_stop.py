"""SIGTERM, SIGHUP and SIGINT end the app as quitting does, whatever its loop is doing.

The handler runs in the main thread between two bytecodes, so also while the loop waits on
the terminal. It hands the quit to the loop (the reply in flight stored as stopped, the
backend shut down, the terminal given back, exit status 128 + the signal's number) and
starts a watchdog: a terminal that hung up is not drawn on again; one that still takes no
writes after `GIVE_UP_OUTPUT_S` is given up; and a quit that has not ended after
`DEADLINE_S` ends the process at once (`end_now`: the engine's processes and temporary
folders go with it). Once the quit has cleaned up, a stopped process exits without the
interpreter's own teardown, which took a second of a busy machine's CPU (`exit_if_stopped`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from app.core.exit_status import signal_status
from app.plumbing.abrupt_end import end_now
from app.plumbing.signals import DISPATCHER

if TYPE_CHECKING:
    from app.ui.app import LingChatApp

STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
GIVE_UP_OUTPUT_S: Final = 0.5
"""How long a quit may wait on a terminal that takes no writes before drawing nothing more."""
DEADLINE_S: Final = 1.5
"""How long a quit may take before the process ends without it."""


class SignalStop:
    """While entered, the stop signals quit the app attached (or, before one is, exit)."""

    def __init__(self, deadline_s: float = DEADLINE_S) -> None:
        self._deadline_s = deadline_s
        self._app: LingChatApp | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signum: int | None = None
        self._ended = threading.Event()
        self._unsubscribe: list[Callable[[], None]] = []

    def __enter__(self) -> SignalStop:
        for signum in STOP_SIGNALS:
            handler = functools.partial(self._on_signal, signum)
            self._unsubscribe.append(DISPATCHER.subscribe(signum, handler))
        return self

    def __exit__(self, *exc: object) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._ended.set()

    def attach(self, app: LingChatApp) -> None:
        """Quit `app`, running on this thread's loop, on a stop signal from now on."""
        self._app, self._loop = app, asyncio.get_running_loop()

    def detach(self) -> None:
        """The app has ended: a signal from now on changes nothing (the process is leaving)."""
        self._app = None

    def exit_if_stopped(self, status: int) -> None:
        """After a stop signal, once everything is cleaned up: flush the standard streams and
        end the process with `status` now; otherwise return."""
        if self._signum is None:
            return
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(status)

    def _on_signal(self, signum: int) -> None:
        if self._signum is not None:
            return  # one quit at a time; the watchdog bounds it
        if self._loop is None:  # the app has not started: nothing to store or stop
            raise SystemExit(signal_status(signum))
        self._signum = signum
        app = self._app
        if app is None:
            return
        if app.terminal is not None:
            app.terminal.check_hang_up()
        self._loop.call_soon_threadsafe(app.stop_for_signal, signum)
        threading.Thread(target=self._watch, args=(signum,), daemon=True).start()

    def _watch(self, signum: int) -> None:
        if self._ended.wait(min(GIVE_UP_OUTPUT_S, self._deadline_s)):
            return
        app = self._app
        if app is not None and app.terminal is not None:
            app.terminal.give_up_output()
        if self._ended.wait(max(self._deadline_s - GIVE_UP_OUTPUT_S, 0.0)):
            return
        name = signal.Signals(signum).name
        end_now(signal_status(signum), f"the quit on {name} took over {self._deadline_s} s")
