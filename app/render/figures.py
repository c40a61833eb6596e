"""A reply's speed figures as people read them: one format for each, wherever it is shown
(the chat's panel, strip and reply footers, `history`, exports, the bench's progress)."""

from __future__ import annotations

from typing import Final

from app.telemetry import LiveSnapshot, ReplyStats

DASH: Final = "–"
"""A figure not known (yet)."""
SEPARATOR: Final = " · "


def rate(tps: float | None) -> str:
    """Tokens per second: `612 tok/s`, `52.3 tok/s`."""
    if tps is None:
        return DASH
    return f"{tps:,.0f} tok/s" if round(tps, 1) >= 100 else f"{tps:.1f} tok/s"


def millis(value: float | None) -> str:
    """A time per token: `1.63 ms`, `19.1 ms`."""
    if value is None:
        return DASH
    ms = value * 1000
    return f"{ms:.2f} ms" if round(ms, 2) < 10 else f"{ms:,.1f} ms"


def seconds(value: float | None) -> str:
    """A duration: `0.21 s`, `12.3 s` or `3 m 05 s`."""
    if value is None:
        return DASH
    if value < 10:
        return f"{value:.2f} s"
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(int(value), 60)
    return f"{minutes} m {secs:02d} s"


def ratio(value: float | None) -> str:
    """An accept length or tokens per step: `3.12`."""
    return DASH if value is None else f"{value:.2f}"


def speed_parts(stats: ReplyStats) -> list[str]:
    """The headline first: `52.3 tok/s`, `TPOT 19.1 ms`, `accept 3.12 (260 rounds)`, then
    `TTFT 0.41 s`; whichever are known."""
    parts = []
    if stats.decode_tps is not None:
        parts.append(rate(stats.decode_tps))
    if stats.tpot_s is not None:
        parts.append(f"TPOT {millis(stats.tpot_s)}")
    if stats.accept_length is not None:
        rounds = f" ({stats.verify_rounds:,} rounds)" if stats.verify_rounds else ""
        parts.append(f"accept {ratio(stats.accept_length)}{rounds}")
    if stats.ttft_s is not None:
        parts.append(f"TTFT {seconds(stats.ttft_s)}")
    return parts


def speed_line(stats: ReplyStats | None) -> str:
    """E.g. `52.3 tok/s · TPOT 19.1 ms · accept 3.12 (260 rounds) · TTFT 0.41 s`; empty
    without stats."""
    return "" if stats is None else SEPARATOR.join(speed_parts(stats))


def live_parts(live: LiveSnapshot) -> list[str]:
    """A streaming reply's figures since its first token: `612 tok/s` (1 / TPOT, as the
    final figure), `TPOT 1.63 ms`, `3.10 tok/step`, `420 tokens`. Tokens per step stands in
    for the accept length, which SGLang reports only once the reply ends (a stream may split
    a verify round)."""
    return [
        rate(live.average_tps),
        f"TPOT {millis(live.tpot_s)}",
        f"{ratio(live.tokens_per_step)} tok/step",
        f"{live.tokens:,} tokens",
    ]
