"""The thread that owns SGLang's Engine, and awaiting its work from the UI's loop.

SGLang's Engine is built and driven on a thread of its own with its own event loop (its
tokenizer manager binds to the loop of its first request). A request whose scheduler died
never ends, so awaiting one checks for that meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

from app.core.errors import EngineCrashed

T = TypeVar("T")
CRASH_POLL_S = 0.5
"""How often an await on the engine checks whether SGLang's scheduler died."""
STOP_WAIT_S = 5.0
"""How long a stop waits for the engine thread to end (a hung loop never does)."""


class EngineThread:
    """A daemon thread running an event loop that owns one SGLang Engine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.loop.run_forever()
        self.loop.close()  # after stop(): its selector and self-pipe go with it

    def submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run `coro` on the engine loop; await the result from any loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run a blocking `fn` on the engine thread (it blocks that loop meanwhile)."""

        async def run() -> T:
            return fn()

        return self.submit(run())

    def stop(self) -> None:
        """Cancel what still runs on the loop, stop and close it, and wait for the thread.

        A reply whose scheduler died never ends by itself: it is cancelled here.
        """

        def cancel_then_stop() -> None:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.call_soon(self.loop.stop)  # after the cancelled tasks have unwound

        self.loop.call_soon_threadsafe(cancel_then_stop)
        self._thread.join(timeout=STOP_WAIT_S)


async def until_crashed(work: Awaitable[T], crash: Callable[[], str | None]) -> T:
    """Await `work`, checking every CRASH_POLL_S whether the engine crashed meanwhile.

    `crash` says why the engine crashed, or None while it runs. `work` is cancelled when
    this await ends first (a crash, or its caller's cancellation).

    Raises:
        EngineCrashed: `crash` said why, before `work` was done.
    """
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=CRASH_POLL_S)
            if not task.done() and (why := crash()) is not None:
                raise EngineCrashed(why)
        return task.result()
    finally:
        task.cancel()  # a no-op once done


def in_daemon_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """Run `fn` on a daemon thread: quitting meanwhile does not wait for it (a download)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the caller went away
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def work() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = fn()
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, daemon=True).start()
    return future
