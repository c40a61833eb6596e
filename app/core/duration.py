"""Durations people write: `0`, `90s`, `30m`, `2h` (a bare number is minutes)."""

from __future__ import annotations

import math
import re

UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds in `text`.

    Raises:
        ValueError: not a duration such as 0, 90s, 30m, 2h.
    """
    match = _DURATION.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 0, 90s, 30m or 2h")
    seconds = float(match.group(1)) * UNITS[(match.group(2) or "m").lower()]
    if not math.isfinite(seconds):
        raise ValueError(f"{text!r} is too long")
    return seconds


def format_duration(seconds: float) -> str:
    """`1h 05m`, `12m 30s`, `45s`."""
    whole = int(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"
