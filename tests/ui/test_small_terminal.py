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

from app.render.figures import speed_line
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import HelpScreen, ReportScreen, SettingsDialog
from app.ui.screens.startup import StartupScreen
from app.ui.widgets.composer import Composer
from app.ui.widgets.messages import ReplyView, UserMessage
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel
from app.ui.widgets.speed_strip import SpeedStrip
from tests.support.pilot import (
    chat_screen,
    reply_done,
    screen_text,
    send,
    text_of,
    wait_until,
)
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
        for _ in range(11):  # the prompt, six fields, Save as preset, Save, Cancel, round again
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
            "thinking",
            "thinking-budget",
            "save-preset",
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


def panels(screen: ChatScreen) -> tuple[bool, bool, bool]:
    """Whether the chat list, the speed panel and the speed strip show."""
    return (
        screen.query_one(Sidebar).display,
        screen.query_one(SpeedPanel).display,
        screen.query_one(SpeedStrip).display,
    )


@pytest.mark.parametrize(
    ("size", "first", "opened_list"),
    [
        ((80, 24), (False, False, True), (True, False, True)),
        ((100, 30), (False, True, False), (True, False, True)),
        ((160, 48), (True, True, False), (False, True, False)),
    ],
)
async def test_the_speed_panel_comes_back_when_the_chat_list_closes(
    make_app: MakeApp,
    backend: ScriptedBackendDouble,
    size: tuple[int, int],
    first: tuple[bool, bool, bool],
    opened_list: tuple[bool, bool, bool],
) -> None:
    """Ctrl+B twice leaves the panels as they were; below 120 columns the chat list takes the
    speed panel's place meanwhile, and the strip stands in for the panel."""
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        screen = await one_exchange(pilot, backend)
        assert panels(screen) == first
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert panels(screen) == opened_list
        await pilot.press("ctrl+b")
        await pilot.pause()
        assert panels(screen) == first
        if not first[1]:
            await pilot.press("f9")  # the panel shown by its key
        await pilot.press("ctrl+f", "escape", "ctrl+b")  # a search, then the list closed
        await pilot.pause()
        assert panels(screen)[1:] == (True, False)


async def test_at_80x24_the_strip_shows_the_headline_live_and_costs_one_row(
    make_app: MakeApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(
        answer_reply(*"abcdefgh", tokens_per_chunk=3, hold_after=4, usage={"verify_rounds": 8})
    )
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await chat_screen(pilot)
        strip = screen.query_one(SpeedStrip)
        assert "waiting for a reply · F9 shows the panel" in text_of(strip)
        await send(pilot, "speed")
        await wait_until(pilot, lambda: "12 tokens" in text_of(strip))
        assert text_of(strip) == "● 300 tok/s · TPOT 3.33 ms · 3.00 tok/step · 12 tokens"
        assert strip.region.height == 1 and on_screen(pilot, strip)
        backend.release()
        await reply_done(pilot)
        await wait_until(pilot, lambda: "accept" in text_of(strip))
        (conversation,) = app.store.list_conversations()
        stats = app.store.messages(conversation.id)[-1].stats
        assert stats is not None and stats.accept_length == 3.0
        assert text_of(strip) == f"✓ {speed_line(stats)}"  # the stored figures, accept first
        backend.enqueue(answer_reply(*"abcdefgh", hold_after=2))
        await send(pilot, "stop it")
        await wait_until(pilot, lambda: text_of(strip).startswith("●"))
        await pilot.press("escape")
        await reply_done(pilot)
        await wait_until(pilot, lambda: text_of(strip).startswith("■ stopped · "))
        await pilot.press("f9")
        await pilot.pause()
        assert not strip.display


async def test_tab_in_the_prompt_indents_and_stays(
    make_app: MakeApp, backend: ScriptedBackendDouble
) -> None:
    app = make_app(backend)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = await chat_screen(pilot)
        prompt = screen.query_one("#prompt", Composer)
        prompt.load_text("def f():")
        prompt.move_cursor(prompt.document.end)
        await pilot.press("enter", "tab")
        await pilot.press("x")
        assert prompt.text == "def f():\n    x"
        assert screen.focused is prompt
        await pilot.press("shift+tab")
        assert screen.focused is not prompt


@pytest.mark.parametrize("screen_name", ["start", "chat"])
async def test_every_footer_label_is_whole_at_80_columns(
    make_app: MakeApp, clock: Any, screen_name: str
) -> None:
    hold = screen_name == "start"
    app = make_app(ScriptedBackendDouble(clock=clock, hold_start=hold))
    async with app.run_test(size=(80, 24)) as pilot:
        if screen_name == "chat":
            await chat_screen(pilot)
        await pilot.pause()
        keys = list(app.screen.query(FooterKey))
        assert keys
        for key in keys:
            label = f"{key.key_display} {key.description}".strip()
            assert on_screen(pilot, key), label
            assert key.region.width >= len(label), label


async def test_the_prompt_hint_is_whole_beside_the_speed_panel_at_80_columns(
    make_app: MakeApp, backend: ScriptedBackendDouble
) -> None:
    """F9 at 80x24 narrows the prompt: its hint keeps the send and stop keys whole."""
    app = make_app(backend)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await chat_screen(pilot)
        prompt = screen.query_one("#prompt", Composer)
        full = "Enter: new line · Ctrl+S: send · Esc: stop"
        assert f"{full} ─╯" in screen_text(app)
        await pilot.press("f9")
        await pilot.pause()
        assert screen.query_one(SpeedPanel).display
        hint = str(prompt.border_subtitle)
        assert "Ctrl+S: send" in hint and "Esc: stop" in hint
        assert f"─ {hint} ─╯" in screen_text(app)
        await pilot.press("f9")
        await pilot.pause()
        assert f"{full} ─╯" in screen_text(app)
