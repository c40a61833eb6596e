"""Small terminals: at 80x24 and 100x30 the messages, the continue hint and F1 stay usable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from app.ui import LingChatApp
from app.ui.widgets.messages import ReplyView, UserMessage
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel
from tests.support.pilot import chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply, long_failing_report

MakeApp = Callable[..., LingChatApp]


def on_screen(pilot: Pilot[Any], widget: Widget) -> bool:
    """True when all of `widget` is drawn inside the terminal."""
    region = widget.region
    width, height = pilot.app.size
    return region.area > 0 and region.right <= width and region.bottom <= height


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
    backend.enqueue(answer_reply("An answer that is long enough to need a wide column."))
    app = make_app(backend)
    async with app.run_test(size=size) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "a question")
        await reply_done(pilot)
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
        await wait_until(pilot, lambda: "Press any key to exit" in text_of(hint))
        await pilot.pause()
        assert on_screen(pilot, hint)
