"""The speed figures' one format, at the edges where it changes."""

from __future__ import annotations

import pytest

from app.render.figures import live_parts, millis, rate, ratio, seconds, speed_line, speed_parts
from app.telemetry import ReplyStats
from app.telemetry.windows import LiveRate


@pytest.mark.parametrize(
    ("tps", "shown"),
    [(None, "–"), (52.34, "52.3 tok/s"), (99.96, "100 tok/s"), (612.4, "612 tok/s"),
     (1234.5, "1,234 tok/s")],
)  # fmt: skip
def test_rate(tps: float | None, shown: str) -> None:
    assert rate(tps) == shown


@pytest.mark.parametrize(
    ("tpot", "shown"),
    [(None, "–"), (0.00163, "1.63 ms"), (0.0099999, "10.0 ms"), (0.0191, "19.1 ms")],
)
def test_millis(tpot: float | None, shown: str) -> None:
    assert millis(tpot) == shown


def test_seconds_and_ratio() -> None:
    assert [seconds(0.214), seconds(12.34), seconds(185)] == ["0.21 s", "12.3 s", "3 m 05 s"]
    assert (ratio(3.125), ratio(None)) == ("3.12", "–")


def test_the_speed_line_names_only_what_was_measured_and_the_rounds() -> None:
    full = ReplyStats(40, 600, 0.2, 1.2, 0.00163, 612.0, accept_length=3.12, verify_rounds=192)
    assert speed_line(full) == "612 tok/s · TPOT 1.63 ms · accept 3.12 (192 rounds) · TTFT 0.20 s"
    plain = ReplyStats(40, 1, 0.2, 0.2, None, None)
    assert speed_parts(plain) == ["TTFT 0.20 s"]
    assert speed_line(None) == ""


def test_live_figures_come_from_the_live_rate() -> None:
    live = LiveRate(window_s=10.0)
    for step in range(11):  # 3 tokens every 5 ms after the first chunk
        live.observe(step * 0.005, 1 + 3 * step)
    snapshot = live.snapshot()
    assert snapshot.tpot_s == pytest.approx(0.005 / 3)
    assert live_parts(snapshot) == ["600 tok/s", "TPOT 1.67 ms", "3.00 tok/step", "31 tokens"]
