"""The download stages of an engine's start: Hugging Face checkpoints into the cache, then
the downloaded checkpoint checked before SGLang reads it (a local folder is the preflight's)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

from app.backend.checkpoint.verify import check_checkpoint
from app.backend.download import Progress, cached_snapshot, fetch_checkpoint, is_hub_id
from app.backend.engine.config import EngineConfig
from app.backend.engine.thread import in_daemon_thread
from app.backend.protocol import LoadStage
from app.core.errors import CheckpointRefused

DOWNLOAD_STAGE = "Downloading the checkpoint"
DRAFT_DOWNLOAD_STAGE = "Downloading the draft model"


async def engine_downloads(config: EngineConfig, t0: float) -> AsyncIterator[LoadStage]:
    """The stages of fetching the checkpoint, then the profile's draft model: those named by
    a Hugging Face id."""
    for model, name in (
        (config.model_path, DOWNLOAD_STAGE),
        (config.draft_model, DRAFT_DOWNLOAD_STAGE),
    ):
        if model is not None and is_hub_id(model):
            async for stage in download_stages(model, t0, name):
                yield stage


async def download_stages(
    model: str, t0: float, name: str = DOWNLOAD_STAGE
) -> AsyncIterator[LoadStage]:
    """Fetch what the Hugging Face cache lacks, with its progress (see `fetch_checkpoint`),
    as stages called `name`.

    `t0` is the start's `time.perf_counter()`, which the stages' times count from.
    """
    loop = asyncio.get_running_loop()
    updates: asyncio.Queue[Progress] = asyncio.Queue()

    def report(progress: Progress) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed: the app quit
            loop.call_soon_threadsafe(updates.put_nowait, progress)

    fetch = in_daemon_thread(lambda: fetch_checkpoint(model, report))
    yield LoadStage(name, False, time.perf_counter() - t0, "checking the cache")
    while not fetch.done():
        await asyncio.wait({fetch}, timeout=0.25)
        latest = None
        while not updates.empty():
            latest = updates.get_nowait()
        if latest is not None:
            elapsed = time.perf_counter() - t0
            line, done, total = latest.line(), latest.done, latest.total
            yield LoadStage(name, False, elapsed, line, done, total)
    fetch.result()
    yield LoadStage(name, True, time.perf_counter() - t0, "in the cache")


def refuse_unloadable_download(config: EngineConfig) -> None:
    """Check the Hugging Face snapshot `config` loads, from its safetensors headers.

    Raises:
        CheckpointRefused: a tensor the loader reads is missing or of the wrong dtype or shape,
            or a shard is missing, truncated or malformed (one line naming file and tensor).
        ModelNotFound: the snapshot is not in the cache.
    """
    if not is_hub_id(config.model_path) or config.overrides.get("load_format") == "dummy":
        return
    folder = cached_snapshot(config.model_path)
    report = check_checkpoint(folder)
    if not report.ok:
        raise CheckpointRefused(f"checkpoint {folder}: {report.line()}")
