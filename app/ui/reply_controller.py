"""`ReplyController`: drives one streaming reply at a time, from the backend to a display.

Textual workers of the screen that shows the replies do the work: one drains the backend's
events into the `ReplyRun` as they come (cheap bookkeeping only); a paced loop hands what
arrived to the reply's display and tells the listener; a slower loop commits a stalled
reply's text. A reply whose ending could not be stored is kept in memory and tried again
until the database is free. The screen's workers end with it.

Only a `LingChatError` becomes a stored error. Any other exception is a bug: it is logged
with its traceback, the reply is stored as stopped with what arrived, and the listener is
told (the bug itself is never stored).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Final, Protocol

from textual.dom import DOMNode
from textual.notifications import SeverityLevel
from textual.worker import Worker, WorkerCancelled, WorkerFailed

from app.backend.protocol import ChatBackend
from app.core.errors import BackendError, LingChatError, StorageError
from app.plumbing.logfile import log_file
from app.ui.format import stats_line
from app.ui.pacing import DrawPacer
from app.ui.reply import ReplyRun

STOP_GRACE_S: Final = 5.0
"""How long a stopped reply may take to end before its stream is cancelled."""
FLUSH_S: Final = 1.0
"""How often a stalled reply's text is committed to the store."""
SAVE_RETRY_S: Final = 2.0
"""How often a reply that could not be stored (a locked database) is tried again."""

logger = logging.getLogger(__name__)


class ReplyDisplay(Protocol):
    """Where one reply is drawn (`ReplyView`)."""

    message_id: int | None

    @property
    def is_attached(self) -> bool:
        """False once the display is gone (a chat switched, the app closing)."""
        ...

    async def write(self, answer: str, reasoning: str) -> None:
        """Append text that arrived."""
        ...

    async def finish(self, footer: str) -> None:
        """The reply ended: show its status line."""
        ...

    def set_footer(self, footer: str) -> None:
        """Replace the status line."""
        ...


class ReplyListener(Protocol):
    """Who hears how replies go (the chat screen)."""

    def reply_progressed(self, run: ReplyRun) -> None:
        """New numbers for the reply in flight."""
        ...

    def reply_ended(self, run: ReplyRun) -> None:
        """The reply ended: `run.status` says how, or is None when it could not be stored."""
        ...

    def replies_unsaved(self, runs: list[ReplyRun]) -> None:
        """The replies the history could not take yet changed (none left: all are saved)."""
        ...

    def notify(
        self, message: str, *, title: str = "", severity: SeverityLevel = "information"
    ) -> None:
        """Show a notice."""
        ...


def footer(run: ReplyRun) -> str:
    """The status line under an ended reply."""
    return stats_line(run.shown_status, run.stats, run.error or run.bug or run.cut_reason)


class ReplyController:
    """Streams replies from `backend` into their displays, one at a time."""

    GROUP: Final = "reply"
    """The workers' group on their node."""

    def __init__(
        self, backend: ChatBackend, listener: ReplyListener, node: DOMNode, *, refresh_s: float
    ) -> None:
        self._backend = backend
        self._listener = listener
        self._node = node
        """Whose workers do the work (the chat screen)."""
        self._refresh_s = refresh_s
        self._pacer = DrawPacer(refresh_s)
        self.run: ReplyRun | None = None
        """The reply streaming now."""
        self._display: ReplyDisplay | None = None
        self._stream: Worker[None] | None = None
        self._unsaved: list[tuple[ReplyRun, ReplyDisplay]] = []
        """Replies that ended but could not be stored yet, kept whole in memory."""
        self._retry: Worker[None] | None = None
        self._grace: asyncio.TimerHandle | None = None
        """Cancels a stopped reply's stream once STOP_GRACE_S has passed."""

    def start(self, run: ReplyRun, display: ReplyDisplay) -> None:
        """Stream `run` into `display`."""
        self.run, self._display = run, display
        self._pacer.reset()
        self._spawn(self._every(run, self._refresh_s, self._draw), "draw")
        self._spawn(self._every(run, FLUSH_S, self._flush), "flush")
        self._stream = self._spawn(self._drain(run, display), "stream")

    async def stop(self) -> bool:
        """Ask the backend to stop the reply; False when none is streaming."""
        run = self.run
        if run is None:
            return False
        if not run.stop_requested:
            run.stop_requested = True
            if self._display is not None:
                self._display.set_footer("■ stopping…")
            self._grace = asyncio.get_running_loop().call_later(STOP_GRACE_S, self._cancel, run)
            try:
                await self._backend.stop_reply()
            except BackendError as error:
                self._listener.notify(f"Could not stop the reply: {error}", severity="error")
        return True

    async def stop_for_quit(self, timeout_s: float = STOP_GRACE_S) -> list[ReplyRun]:
        """Stop the reply in flight (if any), store what arrived, and try once more to store
        the replies that could not be; the ones still unsaved."""
        run, worker = self.run, self._stream
        if run is not None and worker is not None:
            await self.stop()
            await self._settled(worker, timeout_s)
            worker.cancel()  # a no-op once done
            await self._settled(worker, timeout_s)  # its `finally` queues an unsaved reply
            self._close(run)
        return self.save_unsaved()

    def save_unsaved(self, *, wait: bool = True) -> list[ReplyRun]:
        """Try again to store the replies that could not be; the ones still unsaved.

        A reply stored now gets its real status line, and a notice says so. The loop's
        tries do not wait for a busy database (the UI would stall); the last one, at quit,
        does.
        """
        for run, display in list(self._unsaved):
            try:
                run.close(wait=wait)
            except StorageError:
                continue  # still locked: the next try is quiet
            self._unsaved.remove((run, display))
            if display.is_attached:
                display.message_id = run.message_id
                display.set_footer(footer(run))
            self._listener.notify("The reply that could not be saved is saved now.")
            self._listener.replies_unsaved([run for run, _ in self._unsaved])
        return [run for run, _ in self._unsaved]

    async def aclose(self) -> None:
        """Cancel every worker (the displays are going away); an unfinished reply is stored
        as stopped on the way out."""
        workers = self._node.workers.cancel_group(self._node, self.GROUP)
        await asyncio.gather(*map(_ended, workers))
        if self._retry is not None:  # one the cancelled stream may have started
            self._retry.cancel()

    @staticmethod
    async def _settled(worker: Worker[None], timeout_s: float) -> None:
        """Wait up to `timeout_s` for `worker` to end, however it ends; past that the worker
        is cancelled (no waiter is left behind)."""
        ended = asyncio.ensure_future(_ended(worker))
        _, late = await asyncio.wait({ended}, timeout=timeout_s)
        for waiter in late:
            waiter.cancel()

    async def _drain(self, run: ReplyRun, display: ReplyDisplay) -> None:
        """Drain the backend's events into the run; drawing happens in `_draw`."""
        try:
            request = run.request
            run.sent()
            stream = self._backend.stream_reply(
                request.messages,
                request.sampling,
                thinking=request.thinking,
                partial=request.partial,
            )
            async for event in stream:
                run.observe(event)
        except StorageError as error:
            self._listener.notify(f"Could not save the reply: {error}", severity="error")
            try:
                await self._backend.stop_reply()
            except BackendError as stop_error:
                run.fail(str(stop_error))
        except LingChatError as error:
            run.fail(str(error))
        except Exception as error:  # a bug ends this reply, not the app and its chat
            self._report_bug(run, error)
        finally:
            self._close(run)
            await self._end(run, display)
            if not run.finished:
                self._unsaved.append((run, display))
                self._listener.replies_unsaved([run for run, _ in self._unsaved])
                if self._retry is None or self._retry.is_finished:
                    self._retry = self._spawn(self._retry_saving(), "retry saving")

    def _report_bug(self, run: ReplyRun, error: Exception) -> None:
        """Log the bug with its traceback and say so; the reply ends as stopped."""
        conversation = run.request.conversation_id
        logger.error("a bug ended the reply in conversation %s", conversation, exc_info=error)
        run.bug = f"{type(error).__name__}: {error}"
        where = log_file()
        self._listener.notify(
            f"{run.bug}. What arrived is kept; the traceback is in "
            + (str(where) if where else "ling-chat's log"),
            title="A bug in ling-chat ended the reply",
            severity="error",
        )

    async def _draw(self) -> None:
        run, display = self.run, self._display
        if run is None or display is None or not display.is_attached:
            return
        if self._pacer.due():
            await display.write(*run.take_pending())
        self._listener.reply_progressed(run)

    async def _flush(self) -> None:
        if self.run is not None and not self.run.finished:
            try:
                self.run.flush()
            except StorageError as error:
                self._listener.notify(f"Could not save the reply: {error}", severity="error")

    async def _end(self, run: ReplyRun, display: ReplyDisplay) -> None:
        if self._grace is not None:
            self._grace.cancel()
        self._grace = None
        shown = display.is_attached  # not when the app is tearing down with a reply in flight
        if shown:
            await display.write(*run.take_pending())
            await display.finish(footer(run))
        display.message_id = run.message_id
        self.run = self._display = self._stream = None
        if shown:
            self._listener.reply_ended(run)

    async def _retry_saving(self) -> None:
        while self._unsaved:
            await asyncio.sleep(SAVE_RETRY_S)
            self.save_unsaved(wait=False)

    def _close(self, run: ReplyRun) -> None:
        try:
            run.close()
        except StorageError as error:
            self._listener.notify(
                f"Could not save the reply: {error}. It is kept, and saved once the history"
                " can take it.",
                severity="error",
            )

    def _cancel(self, run: ReplyRun) -> None:
        if self.run is run and self._stream is not None:
            self._stream.cancel()

    async def _every(
        self, run: ReplyRun, interval_s: float, tick: Callable[[], Awaitable[None]]
    ) -> None:
        """Await `tick` every `interval_s` seconds while `run` streams."""
        while True:
            await asyncio.sleep(interval_s)
            if self.run is not run:
                return
            await tick()

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> Worker[None]:
        """Run `work` as a worker of the node's reply group; a bug in it is logged, the app
        goes on."""
        return self._node.run_worker(_logged(work), name=name, group=self.GROUP)


async def _logged(work: Coroutine[Any, Any, None]) -> None:
    try:
        await work
    except Exception as error:
        logger.error("a reply worker failed", exc_info=error)


async def _ended(worker: Worker[None]) -> None:
    with contextlib.suppress(WorkerCancelled, WorkerFailed):
        await worker.wait()
