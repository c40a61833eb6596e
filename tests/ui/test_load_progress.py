"""The start screen shows the weight load as it happens: GB read of the total, the rate,
the time left and the stage, from a recorded sequence of the scheduler's progress records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import ProgressBar, Static

from app.backend.engine.boot.boot_log import LOAD_STAGE
from app.backend.engine.boot.load_progress import LoadProgress, progress_stage
from app.backend.protocol import LoadStage
from app.ui import LingChatApp
from tests.support.clock import FakeClock
from tests.support.pilot import chat_screen, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble

RECORDING = Path(__file__).resolve().parents[1] / "fixtures" / "load_progress_recording.json"
SNAPSHOT_SIZE = (80, 24)


def recorded_stages() -> list[LoadStage]:
    """The start screen's updates the engine makes of the recorded progress records."""
    stages = [LoadStage(LOAD_STAGE, False, 29.5, "log: /data/logs/sglang.log")]
    for entry in json.loads(RECORDING.read_text())["records"]:
        stage = progress_stage(LOAD_STAGE, LoadProgress(**entry["record"]), entry["at_s"])
        assert stage is not None
        stages.append(stage)
    return stages


class SteppedBackendDouble(ScriptedBackendDouble):
    """Start-up stages handed over one at a time by the test (never seen by a user)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.queue: asyncio.Queue[LoadStage | None] = asyncio.Queue()

    async def start(self) -> AsyncIterator[LoadStage]:
        while (stage := await self.queue.get()) is not None:
            yield stage


async def test_the_load_shows_gb_of_the_total_rate_time_left_then_each_stage(
    make_app: Callable[..., LingChatApp], clock: FakeClock
) -> None:
    backend = SteppedBackendDouble(clock)
    app = make_app(backend)
    stages = recorded_stages()
    async with app.run_test(size=SNAPSHOT_SIZE) as pilot:
        shown = app.screen.query_one("#stages", Static)
        bar = app.screen.query_one("#download", ProgressBar)
        for stage in stages[:3]:
            backend.queue.put_nowait(stage)
        line = "Reading weights  12.4 of 66.0 GB  2.1 GB/s  about 26 s left"
        await wait_until(pilot, lambda: line in text_of(shown))
        assert "0.0 of 66.0 GB" not in text_of(shown)  # the newest record only
        assert bar.display and (bar.progress, bar.total) == (12.4e9, 66e9)
        backend.queue.put_nowait(stages[3])
        later = "41.3 of 66.0 GB  2.1 GB/s  about 12 s left"
        await wait_until(pilot, lambda: later in text_of(shown))
        for stage, name in zip(
            stages[4:],
            (
                "Processing the weights",
                "Repacking the MoE weights for Humming",
                "Quantizing the LM head to FP8",
                "Capturing CUDA graphs",
            ),
            strict=True,
        ):
            backend.queue.put_nowait(stage)
            await wait_until(pilot, lambda name=name: name in text_of(shown))
            assert not bar.display  # no bytes are read any more
            assert "GB/s" not in text_of(shown)
        backend.queue.put_nowait(LoadStage(LOAD_STAGE, True, 80.0))
        backend.queue.put_nowait(None)
        await chat_screen(pilot)


def test_the_load_mid_read_at_80x24(
    snap_compare: Any, make_app: Callable[..., LingChatApp], clock: FakeClock
) -> None:
    stages = recorded_stages()
    backend = ScriptedBackendDouble(clock=clock, stages=stages[:3], hold_start=True)
    app = make_app(backend)

    async def run_before(pilot: Pilot[Any]) -> None:
        shown = app.screen.query_one("#stages", Static)
        await wait_until(pilot, lambda: "about 26 s left" in text_of(shown))

    assert snap_compare(app, terminal_size=SNAPSHOT_SIZE, run_before=run_before)
