"""Small terminals: at 80x24 and 100x30 the messages, the start-up proof, the dialogs and the
chat list stay usable (they fit, scroll or step aside)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
from textual.containers import VerticalScroll
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Button, Static
from textual.widgets._footer import FooterKey

from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import HelpScreen, ReportScreen, SettingsDialog
from app.ui.screens.startup import StartupScreen
from app.ui.widgets.messages import ReplyView, UserMessage
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel
from tests.support.pilot import chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import (
    ScriptedBackendDouble,
    answer_reply,
    long_failing_report,
    long_passing_report,
)

MakeApp = Callable[..., LingChatApp]


def on_screen(pilot: Pilot[Any], widget: Widget) -> bool:
    """True when all of `widget` is drawn inside the terminal."""
    region = widget.region
    width, height = pilot.app.size
    return region.area > 0 and region.right <= width and region.bottom <= height


def inside(widget: Widget, box: Widget) -> bool:
    """True when all of `widget` is drawn inside the part of `box` that shows its content."""
    return widget.region.area > 0 and box.scrollable_content_region.contains_region(widget.region)


def drawn(pilot: Pilot[Any], text: str) -> bool:
    """True when `text` is on the terminal, on one line."""
    screenshot = html.unescape(pilot.app.export_screenshot()).replace("\xa0", " ")
    return any(text in line for line in re.findall(r"<text[^>]*>([^<]*)</text>", screenshot))


async def one_exchange(pilot: Pilot[Any], backend: ScriptedBackendDouble) -> ChatScreen:
    """The chat screen after a question and an answer long enough to need a wide column."""
    backend.enqueue(answer_reply("An answer that is long enough to need a wide column."))
    screen = await chat_screen(pilot)
    await send(pilot, "a question")
    await reply_done(pilot)
    return screen


SMALL = pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])


@pytest.mark.parametrize(
    ("size", "content_min", "sidebar", "speed"),
    [((80, 24), 60, False, False), ((100, 30), 40, False, True), ((120, 40), 30, True, True)],
)
async def test_messages_keep_a_wide_column_as_the_side_panels_step_aside(
    make_app: MakeApp,
    backend: ScriptedBackendDouble,
    size: tuple[int, int],
    content_min: int,
    sidebar: bool,
    speed: bool,
) -> None:
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        screen = await one_exchange(pilot, backend)
        assert (screen.query_one(Sidebar).display, screen.query_one(SpeedPanel).display) == (
            sidebar,
            speed,
        )
        for message in (screen.query_one(UserMessage), screen.query_one(ReplyView)):
            assert message.content_region.width >= content_min, message


async def test_a_side_panel_comes_back_at_80_columns_by_its_key(
    make_app: MakeApp, backend: ScriptedBackendDouble
) -> None:
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await chat_screen(pilot)
        await pilot.press("f9")
        await pilot.pause()
        assert screen.query_one(SpeedPanel).display
        assert screen.query_one("#chat").region.width >= 40


async def test_f1_stays_in_the_footer_at_80_columns(
    make_app: MakeApp, backend: ScriptedBackendDouble
) -> None:
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await chat_screen(pilot)
        (help_key,) = [key for key in screen.query(FooterKey) if key.key == "f1"]
        assert on_screen(pilot, help_key)


@pytest.mark.parametrize("size", [(80, 24), (100, 30)])
async def test_the_continue_hint_stays_on_screen_under_a_long_proof(
    make_app: MakeApp, clock: Any, size: tuple[int, int]
) -> None:
    app = make_app(ScriptedBackendDouble(clock=clock, report=long_failing_report()))
    async with app.run_test(size=size) as pilot:
        hint = app.screen.query_one("#startup-hint", Static)
        await wait_until(pilot, lambda: "Enter exits" in text_of(hint))
        await pilot.pause()
        assert on_screen(pilot, hint)


@SMALL
async def test_tab_through_chat_settings_never_lands_on_a_hidden_field(
    make_app: MakeApp, backend: ScriptedBackendDouble, size: tuple[int, int]
) -> None:
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        await chat_screen(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsDialog))
        box = app.screen.query_one(".dialog-box", VerticalScroll)
        assert on_screen(pilot, box)
        seen = []
        for _ in range(8):  # the prompt, four fields, Save, Cancel, and round again
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            focused = app.screen.focused
            assert focused is not None and inside(focused, box), (focused, box.scroll_y)
            seen.append(focused.id)
            await pilot.press("tab")
        assert seen == [
            "system-prompt",
            "temperature",
            "top_p",
            "top_k",
            "max_new_tokens",
            "save",
            "cancel",
            "system-prompt",
        ]
        app.screen.query_one("#save", Button).focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen))


async def proof_waiting(pilot: Pilot[Any]) -> StartupScreen:
    """The start-up screen, once its proof is up and it waits for Enter."""
    screen = pilot.app.screen
    assert isinstance(screen, StartupScreen)
    hint = screen.query_one("#startup-hint", Static)
    await wait_until(pilot, lambda: "Enter" in text_of(hint))
    await pilot.pause()
    return screen


@SMALL
async def test_the_start_up_proof_scrolls_to_its_last_line_and_only_enter_starts_the_chat(
    make_app: MakeApp, clock: Any, size: tuple[int, int]
) -> None:
    backend = ScriptedBackendDouble(clock=clock, report=long_passing_report())
    app = make_app(backend, proof_hold_s=2)
    async with app.run_test(size=size) as pilot:
        screen = await proof_waiting(pilot)
        body = screen.query_one("#startup-body", VerticalScroll)
        report = screen.query_one("#report", Static)
        assert report.region.bottom > body.region.bottom  # the proof is longer than the screen
        await pilot.press("down", "pagedown", "x", "space")
        await pilot.pause()
        assert body.scroll_y > 0
        await pilot.pause(2.5)  # past the hold: scrolling keeps the proof up
        assert app.screen is screen
        assert "by itself" not in text_of(screen.query_one("#startup-hint", Static))
        await pilot.press("end")
        await pilot.pause()
        assert "Optimization number 9" in text_of(report)
        assert report.region.bottom <= body.region.bottom  # its last line is on screen
        await pilot.press("home")
        await pilot.pause()
        assert body.scroll_y == 0
        await pilot.press("enter")
        await chat_screen(pilot)


async def test_a_refused_proof_scrolls_and_only_enter_exits(make_app: MakeApp, clock: Any) -> None:
    app = make_app(ScriptedBackendDouble(clock=clock, report=long_failing_report()))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await proof_waiting(pilot)
        await pilot.press("pagedown", "down", "q", "escape")
        await pilot.pause()
        assert app.is_running and screen.query_one("#startup-body").scroll_y > 0
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 2


@SMALL
async def test_help_and_the_proof_fit_the_width_and_scroll_to_their_end(
    make_app: MakeApp, clock: Any, size: tuple[int, int]
) -> None:
    app = make_app(ScriptedBackendDouble(clock=clock, report=long_passing_report()))
    async with app.run_test(size=size) as pilot:
        await chat_screen(pilot)
        for key, dialog in (("f1", HelpScreen), ("f12", ReportScreen)):
            await pilot.press(key)
            await wait_until(pilot, lambda: isinstance(app.screen, dialog))  # noqa: B023
            await pilot.pause()
            box = app.screen.query_one(".dialog-box", VerticalScroll)
            last = app.screen.query(".dialog-hint").last()
            assert on_screen(pilot, box) and not inside(last, box)
            await pilot.press("end")
            await pilot.pause()
            assert inside(last, box), key
            assert drawn(pilot, "Esc closes"), key  # the last line, whole
            await pilot.press("escape")
            await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen))


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (119, 30)])
async def test_the_chat_list_leaves_the_conversation_most_of_the_width(
    make_app: MakeApp, backend: ScriptedBackendDouble, size: tuple[int, int]
) -> None:
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        screen = await one_exchange(pilot, backend)
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert screen.query_one(Sidebar).display and not screen.query_one(SpeedPanel).display
        assert screen.query_one("#chat").region.width >= size[0] * 3 // 4
        for message in (screen.query_one(UserMessage), screen.query_one(ReplyView)):
            assert message.content_region.width >= size[0] // 2, message
        await pilot.press("f9")  # the speed panel back: the chat list steps aside
        await pilot.pause()
        assert screen.query_one(SpeedPanel).display and not screen.query_one(Sidebar).display
