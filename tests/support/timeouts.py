"""How long the tests wait end to end: one setting scales it, and a busy machine does not eat it.

`LING_CHAT_TEST_TIMEOUT_SCALE` (default 1) multiplies each deadline a test sets on a
subprocess or on an app reaching a state; a slow machine (CI) may set it higher. A wait in
this process (`Deadline`) also leaves out the time its thread was ready to run while the
CPUs ran other processes: on 2 cores shared with other test runs, an app that needs 1 s of
CPU to draw a reply may get it over 10 s of wall clock.
"""

from __future__ import annotations

import os
import threading
import time

SCALE_ENV = "LING_CHAT_TEST_TIMEOUT_SCALE"


def scaled(seconds: float) -> float:
    """`seconds` times the scale in `LING_CHAT_TEST_TIMEOUT_SCALE` (1 when unset)."""
    raw = os.environ.get(SCALE_ENV, "1")
    try:
        scale = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_ENV} must be a number, not {raw!r}") from None
    if not scale > 0:
        raise ValueError(f"{SCALE_ENV} must be above 0, not {raw!r}")
    return seconds * scale


class Deadline:
    """`scaled(seconds)` from now, counted on the wall clock less the time this thread
    waited for a CPU (Linux's schedstat; the wall clock alone where it is not kept)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = scaled(seconds)
        self._began = time.monotonic()
        self._starved = starved_s()

    def elapsed(self) -> float:
        """Seconds this thread ran or waited on purpose since the deadline was set."""
        return time.monotonic() - self._began - (starved_s() - self._starved)

    def passed(self) -> bool:
        return self.elapsed() > self.seconds


def starved_s() -> float:
    """Seconds this thread has spent ready to run on a run queue (0 where unknown)."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0
