"""Rolling windows, percentiles and the live decode rate of a streaming reply.

Percentiles use linear interpolation between closest ranks: for sorted values
x[0..n-1], the q-th percentile sits at rank h = q/100 * (n-1) and is
x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)]). This is NumPy's default
(`method="linear"`, Hyndman & Fan type 7): p0 is the minimum, p100 the maximum, and the
median of an even count is the mean of the middle two.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

MAX_RATE_SAMPLES: Final = 4096
"""Hard cap on the chunks `LiveRate` keeps for its recent window (bounds memory at any rate)."""


def percentile(values: Iterable[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) by linear interpolation between closest ranks.

    Raises:
        ValueError: When `values` is empty or q is outside [0, 100].
    """
    ordered = sorted(values)
    if not ordered:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within [0, 100], got {q}")
    rank = q / 100.0 * (len(ordered) - 1)
    low = math.floor(rank)
    frac = rank - low
    lo = ordered[low]
    if frac == 0.0 or low + 1 >= len(ordered):
        return lo
    hi = ordered[low + 1]
    # Clamping keeps the result monotone in q when rounding would overshoot a neighbour.
    return min(max(lo + (hi - lo) * frac, lo), hi)


class RollingWindow:
    """The last `size` values pushed, and their mean."""

    __slots__ = ("_values",)

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"window size must be at least 1, got {size}")
        self._values: deque[float] = deque(maxlen=size)

    def __len__(self) -> int:
        return len(self._values)

    def push(self, value: float) -> None:
        """Add a value, dropping the oldest once the window is full."""
        self._values.append(float(value))

    @property
    def mean(self) -> float | None:
        """The arithmetic mean, or None when empty."""
        if not self._values:
            return None
        return math.fsum(self._values) / len(self._values)


@dataclass(frozen=True, slots=True)
class LiveSnapshot:
    """What `LiveRate` knows so far about the reply being streamed."""

    tokens: int
    """Completion tokens so far (SGLang's cumulative count)."""
    elapsed_s: float
    """Seconds from the first chunk to the newest one."""
    recent_tps: float | None
    """Decode tokens/s over the recent window."""
    average_tps: float | None
    """Decode tokens/s since the first chunk; ends near 1 / TPOT (which runs to `ReplyDone`)."""
    steps: int
    """Chunks after the first that brought new tokens: decode or verify steps."""
    tokens_per_step: float | None
    """Tokens per streamed step since the first chunk; not the accept length (tokens per
    verify round), which only the reply's final usage gives: a stream may split a round."""
    recent_tokens_per_step: float | None
    """Tokens per step over the last `step_window` steps."""

    @property
    def tpot_s(self) -> float | None:
        """Seconds per decode token since the first chunk (1 / `average_tps`): the TPOT so
        far, which the final one (`metrics.time_per_output_token`) settles."""
        return 1.0 / self.average_tps if self.average_tps else None


class LiveRate:
    """Live decode speed and tokens per step from (arrival time, cumulative tokens) per chunk.

    Feed it every streamed chunk of one reply, in order; use a new one per reply.

    The first chunk carries the prefill's token(s): it is the reference point and never
    counts as a decode step, so the average since the first chunk matches the TPOT
    definition in `metrics`. Under SGLang (`stream_interval` 1) every later chunk is one
    decode step, or one verify step with speculative decoding; a server or a replay may
    split a step into several chunks or merge several into one, so tokens per step is shown
    as what it is and never judged as the accept length (`ReplyUsage.accept_length`, from
    the reply's final verify-round count).
    """

    __slots__ = (
        "_first",
        "_last",
        "_samples",
        "_step_deltas",
        "_steps",
        "window_s",
    )

    def __init__(self, window_s: float = 1.0, step_window: int = 32) -> None:
        """Start an empty tracker.

        Args:
            window_s: The recent window for `recent_tps`, in seconds.
            step_window: How many recent steps `recent_tokens_per_step` averages.
        """
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque(maxlen=MAX_RATE_SAMPLES)
        self._step_deltas = RollingWindow(step_window)
        self._first: tuple[float, int] | None = None
        self._last: tuple[float, int] | None = None
        self._steps = 0

    def observe(self, at: float, completion_tokens: int) -> None:
        """Record one chunk: its perf_counter() arrival and the cumulative token count.

        Raises:
            ValueError: When time or the token count goes backwards.
        """
        if self._last is not None:
            last_at, last_tokens = self._last
            if at < last_at:
                raise ValueError(f"chunk at {at} arrived before the previous one at {last_at}")
            if completion_tokens < last_tokens:
                raise ValueError(
                    f"completion tokens fell from {last_tokens} to {completion_tokens}"
                )
            if completion_tokens > last_tokens:
                self._steps += 1
                self._step_deltas.push(completion_tokens - last_tokens)
        else:
            self._first = (at, completion_tokens)
        self._last = (at, completion_tokens)
        self._samples.append((at, completion_tokens))
        # Keep the newest sample at or before the window's start as the reference.
        cutoff = at - self.window_s
        while len(self._samples) > 2 and self._samples[1][0] <= cutoff:
            self._samples.popleft()

    @property
    def tokens(self) -> int:
        """Completion tokens so far."""
        return self._last[1] if self._last else 0

    @property
    def steps(self) -> int:
        """Decode or verify steps seen after the first chunk."""
        return self._steps

    @property
    def elapsed_s(self) -> float:
        """Seconds from the first chunk to the newest one."""
        if self._first is None or self._last is None:
            return 0.0
        return self._last[0] - self._first[0]

    @property
    def recent_tps(self) -> float | None:
        """Decode tokens/s over about the last `window_s` seconds."""
        if len(self._samples) < 2:
            return None
        (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return _rate(n1 - n0, t1 - t0)

    @property
    def average_tps(self) -> float | None:
        """Decode tokens/s since the first chunk."""
        if self._first is None or self._last is None:
            return None
        return _rate(self._last[1] - self._first[1], self._last[0] - self._first[0])

    @property
    def tokens_per_step(self) -> float | None:
        """Mean tokens per streamed step since the first chunk."""
        if not self._steps or self._first is None or self._last is None:
            return None
        return (self._last[1] - self._first[1]) / self._steps

    @property
    def recent_tokens_per_step(self) -> float | None:
        """Mean tokens per step over the recent steps."""
        return self._step_deltas.mean

    def snapshot(self) -> LiveSnapshot:
        """Everything above, frozen."""
        return LiveSnapshot(
            tokens=self.tokens,
            elapsed_s=self.elapsed_s,
            recent_tps=self.recent_tps,
            average_tps=self.average_tps,
            steps=self.steps,
            tokens_per_step=self.tokens_per_step,
            recent_tokens_per_step=self.recent_tokens_per_step,
        )


def _rate(tokens: int, seconds: float) -> float | None:
    if seconds <= 0:
        return None
    return tokens / seconds
