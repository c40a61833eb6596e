"""`DrawPacer`: spaces out Markdown draws so that drawing stays within a CPU budget.

Textual re-lays out the screen after each Markdown append, and the cost grows with the
reply: at 15 Hz a long reply would take a whole core, competing with the engine's
thread in the same process. The pacer measures the UI thread's CPU load between draws
and stretches the interval while the load is over budget (shrinks it back below).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

GROWTH: Final = 1.5


class DrawPacer:
    """Says when the next draw is due."""

    def __init__(
        self,
        min_interval_s: float,
        *,
        max_interval_s: float = 2.0,
        budget: float = 0.5,
        clock: Callable[[], float] = time.perf_counter,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        """Start at the shortest interval.

        Args:
            min_interval_s: the interval while drawing is cheap.
            max_interval_s: the longest interval, however costly drawing gets.
            budget: the share of one core the UI thread may use.
            clock: wall-clock seconds.
            cpu_clock: CPU seconds of the thread that draws.
        """
        self.min_interval_s = min_interval_s
        self.max_interval_s = max(max_interval_s, min_interval_s)
        self.budget = budget
        self._clock = clock
        self._cpu_clock = cpu_clock
        self.interval_s = min_interval_s
        self._mark: tuple[float, float] | None = None
        self._next = 0.0

    def reset(self) -> None:
        """A new reply: draw at the shortest interval again."""
        self.interval_s = self.min_interval_s
        self._mark = None
        self._next = 0.0

    def due(self) -> bool:
        """True when a draw should happen now (and the interval is adjusted)."""
        now = self._clock()
        if now < self._next:
            return False
        cpu = self._cpu_clock()
        if self._mark is not None and now > self._mark[0]:
            load = (cpu - self._mark[1]) / (now - self._mark[0])
            if load > self.budget:
                self.interval_s = min(self.interval_s * GROWTH, self.max_interval_s)
            elif load < self.budget / 2:
                self.interval_s = max(self.interval_s / GROWTH, self.min_interval_s)
        self._mark = (now, cpu)
        self._next = now + self.interval_s
        return True
