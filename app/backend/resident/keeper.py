"""Inside the resident engine: its state file, and the idle timer that stops it.

Idle means no request in flight and no chat window attached (the attach lock free) since a
moment; the timer checks once a second and stops the engine only then, so never mid-reply.
`InFlight` counts SGLang's HTTP requests, replies counted until their last byte is sent.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from app.backend.resident.lock import lock_held
from app.backend.resident.state import ResidentState, remove_state, write_state

PROBES = frozenset({"/health", "/health_generate", "/model_info", "/get_model_info", "/metrics"})
"""Requests that look at the engine without using it: they do not count as activity."""
POLL_S = 1.0

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class Keeper:
    """The resident engine's record of itself and its idle timer."""

    def __init__(
        self,
        folder: Path,
        state: ResidentState,
        on_idle: Callable[[], None],
        *,
        poll_s: float = POLL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.folder = folder
        self.state = state
        self._on_idle = on_idle
        self._poll_s = poll_s
        self._clock = clock
        self._in_flight = 0
        self._ended_at = 0.0
        """When the last request ended (one between two ticks counts too)."""
        self._count = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ling-chat-idle", daemon=True)

    def loading(self) -> None:
        """Say that the engine is loading (a second window waits for it)."""
        write_state(self.folder, self.state)

    def ready(self) -> None:
        """Say that the engine proved itself; the idle timer starts now."""
        now = self._clock()
        self._update(ready=True, active=False, active_at=now)
        self._thread.start()

    def close(self) -> None:
        """The engine stops: its state and key go (a newer engine's stay)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2 * self._poll_s)
        remove_state(self.folder, self.state.pid)

    def begin(self) -> None:
        with self._count:
            self._in_flight += 1

    def end(self) -> None:
        with self._count:
            self._in_flight -= 1
            self._ended_at = self._clock()

    def busy(self) -> bool:
        """A request in flight, or a chat window attached."""
        with self._count:
            if self._in_flight > 0:
                return True
        return lock_held(self.folder)

    def check(self) -> bool:
        """One tick of the timer: records activity; True once idle for `idle_s`."""
        now = self._clock()
        busy = self.busy()
        seen = now if busy else self._ended_at
        active_at = max(self.state.active_at or 0.0, seen)
        if busy != self.state.active:
            self._update(active=busy, active_at=active_at)
        else:
            self.state = dataclasses.replace(self.state, active_at=active_at)
        return not busy and now - active_at >= self.state.idle_s

    def _update(self, **changes: Any) -> None:
        self.state = dataclasses.replace(self.state, **changes)
        write_state(self.folder, self.state)

    def _watch(self) -> None:
        while not self._stop.wait(self._poll_s):
            if self.check():
                self._on_idle()
                return


class InFlight:
    """ASGI middleware: each request but the probes is in flight until its answer ended."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], keeper: Keeper):
        self.app = app
        self.keeper = keeper

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") != "http" or scope.get("path") in PROBES:
            await self.app(scope, receive, send)
            return
        self.keeper.begin()
        try:
            await self.app(scope, receive, send)
        finally:
            self.keeper.end()
