"""FakeClock: a `time.perf_counter` stand-in that only moves when told to."""

from __future__ import annotations


class FakeClock:
    """A clock the test moves by hand: `advance(seconds)`, or set `now`."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
