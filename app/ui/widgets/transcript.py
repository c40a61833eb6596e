"""The transcript: the open conversation's messages, and the reply streaming into it.

A worker drains the backend's events into the `ReplyRun` as they come (cheap
bookkeeping only); a timer draws what arrived at a paced rate and posts
`ReplyProgressed`; `ReplyEnded` follows once the reply is stored (or storing it failed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

from textual import work
from textual.containers import VerticalScroll
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.worker import Worker, WorkerCancelled, WorkerFailed

from app.backend.protocol import ChatBackend
from app.errors import BackendError, StorageError
from app.ui.format import stats_line
from app.ui.pacing import DrawPacer
from app.ui.reply import ReplyRun
from app.ui.widgets.messages import ReplyView

STOP_GRACE_S: Final = 5.0
"""How long a stopped reply may take to end before its worker is cancelled."""
FLUSH_S: Final = 1.0
"""How often a stalled reply's text is committed to the store."""
SAVE_RETRY_S: Final = 2.0
"""How often a reply that could not be stored (a locked database) is tried again."""


class Transcript(VerticalScroll):
    """Messages of the open conversation, kept scrolled to the end while a reply grows."""

    @dataclass
    class ReplyProgressed(Message):
        """New numbers for the reply in flight (only the newest matters)."""

        run: ReplyRun

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, Transcript.ReplyProgressed)

    @dataclass
    class ReplyEnded(Message):
        """The reply ended: `run.status` says how, or is None when it could not be stored."""

        run: ReplyRun

    def __init__(self, backend: ChatBackend, *, refresh_hz: float, id: str | None = None) -> None:
        super().__init__(id=id)
        self._backend = backend
        self._refresh_s = 1 / refresh_hz
        self._pacer = DrawPacer(self._refresh_s)
        self.run: ReplyRun | None = None
        """The reply streaming now."""
        self._view: ReplyView | None = None
        self._worker: Worker[None] | None = None
        self._draw_timers: tuple[Timer, ...] = ()
        self._unsaved: list[tuple[ReplyRun, ReplyView]] = []
        """Replies that ended but could not be stored yet, kept whole in memory."""
        self._save_retry: Timer | None = None

    def on_mount(self) -> None:
        self._draw_timers = (
            self.set_interval(self._refresh_s, self._draw, pause=True),
            self.set_interval(FLUSH_S, self._flush, pause=True),
        )
        self._save_retry = self.set_interval(
            SAVE_RETRY_S, partial(self.save_unsaved, wait=False), pause=True
        )

    async def show(self, widgets: Sequence[Widget], found: Widget | None = None) -> None:
        """Replace the contents; scroll to `found` (marked), else to the end."""
        await self.remove_children()
        await self.mount_all(widgets)
        if found is None:
            self.anchor()
        else:
            self.anchor(False)
            self.scroll_to_widget(found, top=True, animate=False)
            found.add_class("found")

    async def start_reply(self, run: ReplyRun) -> None:
        """Stream `run` into a new reply at the end."""
        self._view = view = ReplyView(streaming=True)
        await self.mount(view)
        self.anchor()
        self.run = run
        self._pacer.reset()
        self._set_timers(running=True)
        self._worker = self._stream(run, view)

    async def stop_reply(self) -> bool:
        """Ask the backend to stop the reply; False when none is streaming."""
        run = self.run
        if run is None:
            return False
        if not run.stop_requested:
            run.stop_requested = True
            if self._view is not None:
                self._view.set_footer("■ stopping…")
            self.set_timer(STOP_GRACE_S, partial(self._cancel, run))
            try:
                await self._backend.stop_reply()
            except BackendError as error:
                self.notify(f"Could not stop the reply: {error}", severity="error")
        return True

    async def stop_for_quit(self, timeout_s: float = STOP_GRACE_S) -> None:
        """Stop the reply in flight (if any) and wait until what arrived is stored."""
        run, worker = self.run, self._worker
        if run is None or worker is None:
            return
        await self.stop_reply()
        try:
            await asyncio.wait_for(worker.wait(), timeout_s)
        except (TimeoutError, WorkerCancelled, WorkerFailed):
            worker.cancel()
        self._close(run)

    def save_unsaved(self, *, wait: bool = True) -> list[ReplyRun]:
        """Try again to store the replies that could not be; the ones still unsaved.

        A reply stored now gets its real status line, and a notice says so. The timer's
        tries do not wait for a busy database (the UI would stall); the last one, at quit,
        does.
        """
        for run, view in list(self._unsaved):
            try:
                run.close(wait=wait)
            except StorageError:
                continue  # still locked: the next try is quiet
            self._unsaved.remove((run, view))
            if view.is_attached:
                view.message_id = run.message_id
                view.set_footer(stats_line(run.shown_status, run.stats, run.error))
            self.notify("The reply that could not be saved is saved now.")
        if not self._unsaved and self._save_retry is not None:
            self._save_retry.pause()
        return [run for run, _ in self._unsaved]

    @work(group="reply", exclusive=True)
    async def _stream(self, run: ReplyRun, view: ReplyView) -> None:
        """Drain the backend's events into the run; drawing happens in `_draw`."""
        try:
            request = run.request
            run.sent()
            async for event in self._backend.stream_reply(request.messages, request.sampling):
                run.observe(event)
        except BackendError as error:
            run.fail(str(error))
        except StorageError as error:
            self.notify(f"Could not save the reply: {error}", severity="error")
            await self._backend.stop_reply()
        except Exception as error:  # a bug ends this reply, not the app and its chat
            run.fail(f"{type(error).__name__}: {error}")
        finally:
            self._close(run)
            await self._end(run, view)
            if not run.finished and self._save_retry is not None:
                self._unsaved.append((run, view))
                self._save_retry.resume()

    async def _draw(self) -> None:
        run, view = self.run, self._view
        if run is None or view is None:
            return
        if self._pacer.due():
            await view.write(*run.take_pending())
        self.post_message(self.ReplyProgressed(run))

    def _flush(self) -> None:
        if self.run is not None and not self.run.finished:
            try:
                self.run.flush()
            except StorageError as error:
                self.notify(f"Could not save the reply: {error}", severity="error")

    async def _end(self, run: ReplyRun, view: ReplyView) -> None:
        self._set_timers(running=False)
        if view.is_attached:  # not when the app is tearing down with a reply in flight
            await view.write(*run.take_pending())
            status = run.shown_status
            await view.finish(stats_line(status, run.stats, run.error))
        view.message_id = run.message_id
        self.run = self._view = self._worker = None
        self.post_message(self.ReplyEnded(run))

    def _close(self, run: ReplyRun) -> None:
        try:
            run.close()
        except StorageError as error:
            self.notify(
                f"Could not save the reply: {error}. It is kept, and saved once the database"
                " is free.",
                severity="error",
            )

    def _cancel(self, run: ReplyRun) -> None:
        if self.run is run and self._worker is not None:
            self._worker.cancel()

    def _set_timers(self, *, running: bool) -> None:
        for timer in self._draw_timers:
            timer.resume() if running else timer.pause()
