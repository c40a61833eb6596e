"""Alternatives and branches in the real app at 80x24 and 100x30: Ctrl+R keeps the old reply
(`2/2`), Alt+Left/Right move between alternatives, Alt+Up/Down select the message F4 edits
into a new branch, a search hit opens on its branch; the path shown survives a restart."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from app.core.chat import Sampling
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.branches import SELECTED
from app.ui.screens.chat import ChatScreen
from app.ui.widgets.messages import ReplyView, UserMessage
from tests.support.clock import FakeClock
from tests.support.pilot import Notices, chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

MakeApp = Callable[..., LingChatApp]
SIZES = [(80, 24), (100, 30)]


def shown(screen: ChatScreen) -> list[str]:
    """The transcript's messages, top to bottom: the user's text, or the reply's answer."""
    return [
        text_of(w) if isinstance(w, UserMessage) else w.answer
        for w in screen.query("UserMessage, ReplyView").results()
        if isinstance(w, UserMessage | ReplyView)
    ]


def drawn(pilot: Pilot[Any], text: str) -> bool:
    """True when `text` is on the terminal, on one line."""
    screenshot = html.unescape(pilot.app.export_screenshot()).replace("\xa0", " ")
    return any(text in line for line in re.findall(r"<text[^>]*>([^<]*)</text>", screenshot))


def selected(screen: ChatScreen) -> list[str]:
    return [
        text_of(w) if isinstance(w, UserMessage) else w.answer
        for w in screen.query(f".{SELECTED}").results()
        if isinstance(w, UserMessage | ReplyView)
    ]


async def two_exchanges(pilot: Pilot[Any]) -> ChatScreen:
    screen = await chat_screen(pilot)
    for question in ("sheep", "cats"):
        await send(pilot, question)
        await reply_done(pilot)
    return screen


@pytest.mark.parametrize("size", SIZES)
async def test_ctrl_r_keeps_the_old_reply_and_alt_left_right_switch_across_a_restart(
    make_app: MakeApp, clock: FakeClock, db_path: Path, size: tuple[int, int]
) -> None:
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(answer_reply("red"), answer_reply("blue"))
    notices = Notices()
    async with make_app(backend).run_test(size=size, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "a colour?")
        await reply_done(pilot)
        await pilot.press("ctrl+r")
        await reply_done(pilot)
        assert shown(screen) == ["a colour?", "blue"]
        await wait_until(pilot, lambda: drawn(pilot, "Ling · 2/2"))
        await pilot.press("alt+left")
        await wait_until(pilot, lambda: shown(screen) == ["a colour?", "red"])
        await wait_until(pilot, lambda: drawn(pilot, "Ling · 1/2"))
        await pilot.press("alt+left")
        await wait_until(pilot, lambda: "1/2 is the first" in notices.messages)
        assert shown(screen) == ["a colour?", "red"]
    assert backend.requests[0][0] == backend.requests[1][0]

    with ChatStore.open(db_path) as store:
        again = LingChatApp(
            ScriptedBackendDouble(clock=clock), store, sampling=Sampling(), proof_hold_s=0
        )
        async with again.run_test(size=size) as pilot:
            screen = await chat_screen(pilot)
            assert shown(screen) == ["a colour?", "red"]
            await wait_until(pilot, lambda: drawn(pilot, "Ling · 1/2"))
            await pilot.press("alt+right")
            await wait_until(pilot, lambda: shown(screen) == ["a colour?", "blue"])
        (chat,) = store.list_conversations()
        assert [m.content for m in store.messages(chat.id)] == ["a colour?", "blue"]


@pytest.mark.parametrize("size", SIZES)
async def test_alt_up_down_select_an_earlier_message_and_f4_edits_it_into_a_branch(
    make_app: MakeApp, clock: FakeClock, db_path: Path, size: tuple[int, int]
) -> None:
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(*(answer_reply(f"about {name}") for name in ("sheep", "cats", "goats")))
    async with make_app(backend).run_test(size=size) as pilot:
        screen = await two_exchanges(pilot)
        await pilot.press("alt+up", "alt+up", "alt+up", "alt+up")  # the top stops it
        await wait_until(pilot, lambda: selected(screen) == ["sheep"])
        await pilot.press("alt+down")
        await wait_until(pilot, lambda: selected(screen) == ["about sheep"])
        await pilot.press("alt+up")
        await wait_until(pilot, lambda: selected(screen) == ["sheep"])
        (mark,) = screen.query(f".{SELECTED}")
        assert mark.region.area and screen.region.contains_region(mark.region)
        await pilot.press("f4")
        prompt = screen.query_one("#prompt", TextArea)
        await wait_until(pilot, lambda: prompt.text == "sheep")
        prompt.load_text("goats")
        await pilot.press("ctrl+s")
        await reply_done(pilot)
        assert shown(screen) == ["goats", "about goats"]
        await wait_until(pilot, lambda: drawn(pilot, "You · 2/2"))
        assert [m.content for m in backend.requests[-1][0]] == ["goats"]  # the path only
        await pilot.press("alt+left")
        await wait_until(
            pilot, lambda: shown(screen) == ["sheep", "about sheep", "cats", "about cats"]
        )
        await wait_until(pilot, lambda: drawn(pilot, "You · 1/2"))
    with ChatStore.open(db_path) as store:
        (chat,) = store.list_conversations()
        assert [m.content for m in store.messages(chat.id)] == [
            "sheep",
            "about sheep",
            "cats",
            "about cats",
        ]
        assert len(store.all_messages(chat.id)) == 6


@pytest.mark.parametrize("size", SIZES)
async def test_ctrl_r_on_a_selected_earlier_reply_sends_the_path_up_to_it(
    make_app: MakeApp, clock: FakeClock, size: tuple[int, int]
) -> None:
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(*(answer_reply(text) for text in ("about sheep", "about cats", "sheep!")))
    async with make_app(backend).run_test(size=size) as pilot:
        screen = await two_exchanges(pilot)
        await pilot.press("alt+up", "alt+up")
        await wait_until(pilot, lambda: selected(screen) == ["about sheep"])
        await pilot.press("ctrl+r")
        await reply_done(pilot)
        assert shown(screen) == ["sheep", "sheep!"]
        assert [m.content for m in backend.requests[-1][0]] == ["sheep"]
        await wait_until(pilot, lambda: drawn(pilot, "Ling · 2/2"))
        await pilot.press("alt+left")
        await wait_until(
            pilot, lambda: shown(screen) == ["sheep", "about sheep", "cats", "about cats"]
        )


@pytest.mark.parametrize("size", SIZES)
async def test_a_search_hit_in_another_branch_opens_on_that_branch(
    make_app: MakeApp, clock: FakeClock, store: ChatStore, size: tuple[int, int]
) -> None:
    chat = store.create_conversation("Animals")
    sheep = store.add_user_message(chat.id, "sheep")
    store.add_user_message(chat.id, "a whale", alternative_to=sheep.id)  # on screen
    store.choose(sheep.id)
    async with make_app(ScriptedBackendDouble(clock=clock)).run_test(size=size) as pilot:
        screen = await chat_screen(pilot)
        assert shown(screen) == ["sheep"]
        await pilot.press("ctrl+f")
        screen.query_one("#search", Input).value = "whale"
        await pilot.pause()
        await pilot.press("enter", "enter")
        await wait_until(pilot, lambda: shown(screen) == ["a whale"])
        assert screen.query(".found")
        await wait_until(pilot, lambda: drawn(pilot, "You · 2/2"))


@pytest.mark.parametrize("size", SIZES)
async def test_a_long_reply_shows_its_place_at_its_end_too(
    make_app: MakeApp, clock: FakeClock, size: tuple[int, int]
) -> None:
    long = "\n\n".join(f"Paragraph {n} of a long answer." for n in range(40))
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(answer_reply("short"), answer_reply(long))
    async with make_app(backend).run_test(size=size) as pilot:
        await chat_screen(pilot)
        await send(pilot, "tell me")
        await reply_done(pilot)
        await pilot.press("ctrl+r")
        await reply_done(pilot)
        await wait_until(pilot, lambda: drawn(pilot, "‹ 2/2 ›"))
        assert drawn(pilot, "Paragraph 39") and not drawn(pilot, "Ling · 2/2")
