"""Snapshots (SVG) of the speed panel, the start-up proof report and one exchange.

Everything is pinned: a fake clock, scripted replies, fixed numbers.
Update after looking at the report: `pytest tests/ui --snapshot-update`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.pilot import Pilot
from textual.widgets import Static, TextArea

from app.backend.protocol import DraftShape
from app.storage import MessageStatus
from app.telemetry import ReplyStats
from app.telemetry.session import summarize_session
from app.telemetry.windows import LiveSnapshot
from app.ui import LingChatApp
from app.ui.widgets.speed_panel import SpeedPanel
from tests.support.pilot import SIZE, chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import (
    FakeClock,
    ScriptedBackendDouble,
    answer_reply,
    failing_report,
    long_failing_report,
)

SnapCompare = Callable[..., bool]


def stats(tps: float, accept: float, tokens: int = 600) -> ReplyStats:
    tpot = 1 / tps
    return ReplyStats(
        prompt_tokens=40,
        completion_tokens=tokens,
        ttft_s=0.2,
        latency_s=0.2 + tpot * (tokens - 1),
        tpot_s=tpot,
        decode_tps=tps,
        accept_length=accept,
        verify_rounds=round(tokens / accept),
    )


class SpeedPanels(App[None]):
    """The panel twice: streaming (live) and after the reply, with a session behind it;
    the first drafts NEXTN steps, the second DSpark blocks."""

    CSS_PATH = "../../app/ui/app.tcss"

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield SpeedPanel(id="live")
            yield SpeedPanel(id="final")

    def on_mount(self) -> None:
        session = summarize_session([stats(58.0, 3.1), stats(61.5, 3.3), stats(44.0, 2.2)])
        for panel in self.query(SpeedPanel):
            panel.show_session(session)
            panel.show_proof(failing_report())
        live = LiveSnapshot(
            tokens=412,
            elapsed_s=7.0,
            recent_tps=63.2,
            average_tps=58.9,
            steps=130,
            tokens_per_step=3.16,
            recent_tokens_per_step=3.4,
        )
        self.query_one("#live", SpeedPanel).show_live(live, ttft_s=0.21)
        self.query_one("#live", SpeedPanel).show_draft(DraftShape(3, 4))
        self.query_one("#final", SpeedPanel).show_draft(DraftShape(1, 9, block=8))
        self.query_one("#final", SpeedPanel).show_last(
            MessageStatus.COMPLETE, stats(44.0, 2.2), context_length=32768
        )


def test_speed_panel(snap_compare: SnapCompare) -> None:
    assert snap_compare(SpeedPanels(), terminal_size=(72, 32))


def test_startup_with_a_failed_proof(
    snap_compare: SnapCompare, make_app: Callable[..., LingChatApp], clock: FakeClock
) -> None:
    app = make_app(ScriptedBackendDouble(clock=clock, report=failing_report()))

    async def run_before(pilot: Pilot[Any]) -> None:
        hint = app.screen.query_one("#startup-hint", Static)
        await wait_until(pilot, lambda: "exit" in text_of(hint))

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


SMALL_SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((100, 30), id="100x30")]


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_a_long_refused_proof_in_a_small_terminal(
    snap_compare: SnapCompare,
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    size: tuple[int, int],
) -> None:
    """The continue hint stays under the proof, however long it is."""
    app = make_app(ScriptedBackendDouble(clock=clock, report=long_failing_report()))

    async def run_before(pilot: Pilot[Any]) -> None:
        hint = app.screen.query_one("#startup-hint", Static)
        await wait_until(pilot, lambda: "exit" in text_of(hint))

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_one_exchange(
    snap_compare: SnapCompare, make_app: Callable[..., LingChatApp], clock: FakeClock
) -> None:
    assert snap_compare(exchange_app(make_app, clock), terminal_size=SIZE, run_before=exchange)


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_one_exchange_in_a_small_terminal(
    snap_compare: SnapCompare,
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    size: tuple[int, int],
) -> None:
    """The side panels step aside; the messages keep their text."""
    assert snap_compare(exchange_app(make_app, clock), terminal_size=size, run_before=exchange)


def exchange_app(make_app: Callable[..., LingChatApp], clock: FakeClock) -> LingChatApp:
    """The app with one scripted reply (thinking, then a code block) queued."""
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(
        answer_reply(
            "Use slicing:\n\n",
            "```python\ndef reverse(text: str) -> str:\n    return text[::-1]\n```\n",
            reasoning=["Slicing with a negative step is simplest."],
            step_s=0.05,
            usage={"verify_rounds": 2},
        )
    )
    return make_app(backend)


async def exchange(pilot: Pilot[Any]) -> None:
    """Ask the question and wait for the whole reply."""
    await chat_screen(pilot)
    await send(pilot, "How do I reverse a string in Python?")
    screen = await reply_done(pilot)
    screen.query_one("#prompt", TextArea).cursor_blink = False  # drawn the same every time
    await pilot.pause()


def held_reply_app(make_app: Callable[..., LingChatApp], clock: FakeClock) -> LingChatApp:
    """The app with one scripted reply that holds after five chunks of three tokens."""
    backend = ScriptedBackendDouble(clock=clock)
    words = [f"word{n} " for n in range(12)]
    backend.enqueue(answer_reply(*words, hold_after=5, step_s=0.004, usage={"verify_rounds": 4}))
    return make_app(backend)


async def mid_reply(pilot: Pilot[Any]) -> None:
    """Ask, and wait until the held reply's live figures show."""
    screen = await chat_screen(pilot)
    await send(pilot, "How fast is it?")
    strip, numbers = screen.query_one("#speed-strip", Static), screen.query_one("#reply-numbers")
    await wait_until(pilot, lambda: "15 tokens" in text_of(strip) + text_of(numbers))
    screen.query_one("#prompt", TextArea).cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_mid_reply_the_headline_shows(
    snap_compare: SnapCompare,
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    size: tuple[int, int],
) -> None:
    """tok/s, TPOT and tokens per step while the reply streams: the strip at 80x24, the
    panel at 100x30."""
    app = held_reply_app(make_app, clock)
    assert snap_compare(app, terminal_size=size, run_before=mid_reply)


@pytest.mark.parametrize("size", SMALL_SIZES)
def test_the_speed_views_after_opening_and_closing_the_chat_list(
    snap_compare: SnapCompare,
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    size: tuple[int, int],
) -> None:
    """After a reply (its accept length final), Ctrl+B twice: as before it."""

    async def toggled(pilot: Pilot[Any]) -> None:
        await exchange(pilot)
        await pilot.press("ctrl+b")
        await pilot.pause()
        await pilot.press("ctrl+b")
        await pilot.pause()

    assert snap_compare(exchange_app(make_app, clock), terminal_size=size, run_before=toggled)
