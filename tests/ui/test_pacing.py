"""DrawPacer: draws are spaced out while they cost too much CPU, and sped up again after."""

from __future__ import annotations

import pytest

from app.ui.pacing import DrawPacer


class Clocks:
    """A wall clock and a CPU clock that the test moves."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def spend(self, wall: float, load: float) -> None:
        self.wall += wall
        self.cpu += wall * load


def pacer_with(clocks: Clocks) -> DrawPacer:
    return DrawPacer(
        0.1, max_interval_s=1.0, budget=0.5, clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu
    )


def test_costly_drawing_stretches_the_interval_to_the_maximum() -> None:
    clocks = Clocks()
    pacer = pacer_with(clocks)
    assert pacer.due()
    for _ in range(10):
        clocks.spend(pacer.interval_s, load=0.9)
        assert pacer.due()
    assert pacer.interval_s == 1.0
    clocks.spend(0.5, load=0.0)
    assert not pacer.due()


def test_cheap_drawing_comes_back_to_the_minimum_and_reset_starts_over() -> None:
    clocks = Clocks()
    pacer = pacer_with(clocks)
    pacer.due()
    for _ in range(10):
        clocks.spend(pacer.interval_s, load=0.9)
        pacer.due()
    for _ in range(10):
        clocks.spend(pacer.interval_s, load=0.1)
        pacer.due()
    assert pacer.interval_s == 0.1
    clocks.spend(pacer.interval_s, load=0.9)
    pacer.due()
    pacer.reset()
    assert pacer.interval_s == 0.1 and pacer.due()


def test_a_load_within_budget_keeps_the_interval() -> None:
    clocks = Clocks()
    pacer = pacer_with(clocks)
    pacer.due()
    clocks.spend(0.1, load=0.9)
    pacer.due()
    assert pacer.interval_s == pytest.approx(0.15)
    for _ in range(5):
        clocks.spend(pacer.interval_s, load=0.4)
        pacer.due()
    assert pacer.interval_s == pytest.approx(0.15)
