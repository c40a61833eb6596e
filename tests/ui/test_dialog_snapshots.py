"""Snapshots (SVG) of every screen and dialog at 80x24 and 100x30.

One chat with one measured exchange, a proof as long as the stack's, a fake clock.
Update after looking at the report: `pytest tests/ui/test_dialog_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Input, Static, TextArea

from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import (
    ConfirmDialog,
    HelpScreen,
    RenameDialog,
    ReportScreen,
    SettingsDialog,
)
from tests.support.clock import FakeClock
from tests.support.pilot import chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply, long_passing_report

SnapCompare = Callable[..., bool]
Steps = Callable[[Pilot[Any]], Awaitable[None]]
SIZES = pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])


def app_with_one_exchange(
    make_app: Callable[..., LingChatApp], clock: FakeClock, **options: Any
) -> LingChatApp:
    """The app with a long proof and one scripted reply queued."""
    backend = ScriptedBackendDouble(clock=clock, report=long_passing_report())
    backend.enqueue(
        answer_reply(
            "Use slicing: `text[::-1]` walks the string backwards, one character at a time.",
            step_s=0.05,
            usage={"verify_rounds": 2},
        )
    )
    return make_app(backend, **options)


async def still(pilot: Pilot[Any]) -> None:
    """No blinking text cursor on any screen, no scroll in flight, no focus on the dialog:
    drawn the same every time."""
    await pilot.pause()
    await pilot.wait_for_scheduled_animations()
    for screen in pilot.app.screen_stack:
        for widget in screen.query("TextArea, Input").results():
            if isinstance(widget, TextArea | Input):
                widget.cursor_blink = False
    pilot.app.screen.set_focus(None)
    await pilot.pause()


async def one_exchange(pilot: Pilot[Any]) -> ChatScreen:
    await chat_screen(pilot)
    await send(pilot, "How do I reverse a string in Python?")
    return await reply_done(pilot)


def opens(key: str, screen: type[Screen[Any]]) -> Steps:
    """One exchange, then `key` opens `screen`."""

    async def steps(pilot: Pilot[Any]) -> None:
        await one_exchange(pilot)
        await pilot.press(key)
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, screen))
        await still(pilot)

    return steps


async def chat_list(pilot: Pilot[Any]) -> None:
    await one_exchange(pilot)
    await pilot.press("ctrl+b")
    await still(pilot)


async def search(pilot: Pilot[Any]) -> None:
    await one_exchange(pilot)
    await pilot.press("ctrl+f", *"reverse")
    await still(pilot)


async def editing(pilot: Pilot[Any]) -> None:
    await one_exchange(pilot)
    await pilot.press("f4")
    await still(pilot)


SCREENS = {
    "help": opens("f1", HelpScreen),
    "chat_settings": opens("f3", SettingsDialog),
    "proof": opens("f12", ReportScreen),
    "speed_by_context": opens("f7", ReportScreen),
    "rename": opens("f2", RenameDialog),
    "delete": opens("f8", ConfirmDialog),
    "chat_list": chat_list,
    "search": search,
    "edit_and_resend": editing,
}


@SIZES
@pytest.mark.parametrize("name", list(SCREENS))
def test_dialog(
    snap_compare: SnapCompare,
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    name: str,
    size: tuple[int, int],
) -> None:
    app = app_with_one_exchange(make_app, clock)
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[name])


@SIZES
def test_start_up_proof(
    snap_compare: SnapCompare,
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    size: tuple[int, int],
) -> None:
    """The passing proof held up (a scroll key holds it): its top, the hint under it."""
    app = app_with_one_exchange(make_app, clock, proof_hold_s=30)

    async def run_before(pilot: Pilot[Any]) -> None:
        hint = app.screen.query_one("#startup-hint", Static)
        await wait_until(pilot, lambda: "Enter" in text_of(hint))
        await pilot.press("down", "up")
        await still(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
