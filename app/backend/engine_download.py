"""The download stage of an engine's start: a Hugging Face checkpoint into the cache."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from app.backend.download import Progress, fetch_checkpoint
from app.backend.engine_thread import in_daemon_thread
from app.backend.protocol import LoadStage

DOWNLOAD_STAGE = "Downloading the checkpoint"


async def download_stages(model: str, t0: float) -> AsyncIterator[LoadStage]:
    """Fetch what the Hugging Face cache lacks, with its progress (see `fetch_checkpoint`).

    `t0` is the start's `time.perf_counter()`, which the stages' times count from.
    """
    loop = asyncio.get_running_loop()
    updates: asyncio.Queue[Progress] = asyncio.Queue()

    def report(progress: Progress) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the app quit
            loop.call_soon_threadsafe(updates.put_nowait, progress)

    fetch = in_daemon_thread(lambda: fetch_checkpoint(model, report))
    yield LoadStage(DOWNLOAD_STAGE, False, time.perf_counter() - t0, "checking the cache")
    while not fetch.done():
        await asyncio.wait({fetch}, timeout=0.25)
        latest = None
        while not updates.empty():
            latest = updates.get_nowait()
        if latest is not None:
            elapsed = time.perf_counter() - t0
            line, done, total = latest.line(), latest.done, latest.total
            yield LoadStage(DOWNLOAD_STAGE, False, elapsed, line, done, total)
    fetch.result()
    yield LoadStage(DOWNLOAD_STAGE, True, time.perf_counter() - t0, "in the cache")
