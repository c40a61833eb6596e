"""FakeClock: a `time.perf_counter` (and `asyncio.sleep`) stand-in that moves when told to."""

from __future__ import annotations

import asyncio


class FakeClock:
    """A clock the test moves by hand: `advance(seconds)`, or set `now`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    async def sleep(self, seconds: float) -> None:
        """An `asyncio.sleep` on this clock: time jumps, and other tasks get one turn."""
        self.advance(seconds)
        await asyncio.sleep(0)
