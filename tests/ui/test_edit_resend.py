"""Editing the last message (F4): the edited exchange stays on screen until the edit is
sent, and in the history file for good (a branch of its own); Esc, another chat or quitting
leave everything as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import TextArea

from app.core.chat import Sampling
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.exchange_edit import EDITING
from app.ui.widgets.messages import ReplyView, UserMessage
from tests.support.clock import FakeClock
from tests.support.pilot import SIZE, Notices, chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply
from tests.support.storage import write_locked

MakeApp = Callable[..., LingChatApp]


def stored(db_path: Path) -> list[tuple[str, str]]:
    """(role, text) of every message in the history file, read through a fresh store."""
    with ChatStore.open(db_path) as store:
        return [
            (m.role.value, m.content)
            for c in store.list_conversations()
            for m in store.messages(c.id)
        ]


def shown(screen: ChatScreen) -> list[str]:
    """The transcript's messages, top to bottom: the user's text, or the reply's answer."""
    return [
        text_of(w) if isinstance(w, UserMessage) else w.answer
        for w in screen.query("UserMessage, ReplyView").results()
        if isinstance(w, UserMessage | ReplyView)
    ]


def prompt_of(screen: ChatScreen) -> TextArea:
    return screen.query_one("#prompt", TextArea)


async def cats_then_f4(pilot: Pilot[None], draft: str = "") -> ChatScreen:
    """Two exchanges (sheep, cats), `draft` typed in the prompt, then F4."""
    screen = await chat_screen(pilot)
    for question in ("sheep", "cats"):
        await send(pilot, question)
        await reply_done(pilot)
    prompt_of(screen).load_text(draft)
    await pilot.press("f4")
    await wait_until(pilot, lambda: prompt_of(screen).text == "cats")
    return screen


def cats_backend(clock: FakeClock, *more: str) -> ScriptedBackendDouble:
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(answer_reply("about sheep"), answer_reply("about cats"))
    backend.enqueue(*(answer_reply(answer) for answer in more))
    return backend


BEFORE = [
    ("user", "sheep"),
    ("assistant", "about sheep"),
    ("user", "cats"),
    ("assistant", "about cats"),
]
SHOWN_BEFORE = [text for _, text in BEFORE]


async def shown_after_a_restart(db_path: Path, clock: FakeClock) -> list[str]:
    """What the app shows when it starts again on the same history file."""
    with ChatStore.open(db_path) as store:
        again = LingChatApp(
            ScriptedBackendDouble(clock=clock), store, sampling=Sampling(), proof_hold_s=0
        )
        async with again.run_test(size=SIZE) as pilot:
            return shown(await chat_screen(pilot))


async def test_f4_then_esc_keeps_the_exchange_and_gives_the_prompt_back(
    make_app: MakeApp, clock: FakeClock, db_path: Path
) -> None:
    app = make_app(cats_backend(clock))
    async with app.run_test(size=SIZE) as pilot:
        screen = await cats_then_f4(pilot, draft="half a thought")
        assert stored(db_path) == BEFORE
        assert shown(screen) == SHOWN_BEFORE
        marked = [w for w in screen.query(f".{EDITING}")]
        assert [getattr(w, "message_id", None) for w in marked] == [3, 4]
        await pilot.press("escape")
        await wait_until(pilot, lambda: prompt_of(screen).text == "half a thought")
        assert not screen.query(f".{EDITING}")
        assert shown(screen) == SHOWN_BEFORE
    assert stored(db_path) == BEFORE
    assert await shown_after_a_restart(db_path, clock) == SHOWN_BEFORE


async def test_the_edit_hint_is_the_prompts_title_until_sent_and_no_notice_covers_it(
    make_app: MakeApp, clock: FakeClock
) -> None:
    app = make_app(cats_backend(clock, "about dogs"))
    notices = Notices()
    async with app.run_test(size=(80, 24), message_hook=notices) as pilot:
        screen = await cats_then_f4(pilot)
        title = str(prompt_of(screen).border_title)
        assert title == "editing · Ctrl+S: send as a new branch · Esc: cancel"
        prompt_of(screen).load_text("dogs")
        await pilot.press("ctrl+s")
        await reply_done(pilot)
        assert not prompt_of(screen).border_title
        assert notices.messages == []
        await pilot.press("f4", "escape")
        await wait_until(pilot, lambda: not prompt_of(screen).border_title)


async def test_f4_then_quit_loses_nothing(
    make_app: MakeApp, clock: FakeClock, db_path: Path
) -> None:
    app = make_app(cats_backend(clock))
    async with app.run_test(size=SIZE) as pilot:
        screen = await cats_then_f4(pilot)
        prompt_of(screen).load_text("dogs, not cats")
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 0
    assert stored(db_path) == BEFORE
    assert await shown_after_a_restart(db_path, clock) == SHOWN_BEFORE


async def test_f4_edit_send_shows_a_new_branch_and_keeps_the_old_one(
    make_app: MakeApp, clock: FakeClock, db_path: Path
) -> None:
    backend = cats_backend(clock, "about dogs")
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        screen = await cats_then_f4(pilot)
        await pilot.press(*["backspace"] * 4, *"dogs")
        assert stored(db_path) == BEFORE  # typing deletes nothing
        await pilot.press("ctrl+s")
        await reply_done(pilot)
        assert shown(screen) == ["sheep", "about sheep", "dogs", "about dogs"]
        assert not screen.query(f".{EDITING}")
    assert stored(db_path) == [*BEFORE[:2], ("user", "dogs"), ("assistant", "about dogs")]
    assert [m.content for m in backend.requests[2][0]] == ["sheep", "about sheep", "dogs"]
    with ChatStore.open(db_path) as store:
        (chat,) = store.list_conversations()
        every = [m.content for m in store.all_messages(chat.id)]
    assert every == [*SHOWN_BEFORE, "dogs", "about dogs"]


async def test_a_send_that_cannot_be_stored_keeps_the_edited_exchange(
    make_app: MakeApp, clock: FakeClock, db_path: Path
) -> None:
    backend = cats_backend(clock, "about dogs")
    app = make_app(backend)
    notices = Notices()
    async with app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await cats_then_f4(pilot)
        prompt_of(screen).load_text("dogs")
        with write_locked(db_path):
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: notices.messages)
        assert "is locked by another process" in notices.messages[-1]
        assert prompt_of(screen).text == "dogs"
        assert shown(screen) == SHOWN_BEFORE
        assert stored(db_path) == BEFORE
        await pilot.press("ctrl+s")  # the lock is gone: the edit is still there to send
        await reply_done(pilot)
        assert shown(screen) == ["sheep", "about sheep", "dogs", "about dogs"]
    assert stored(db_path) == [*BEFORE[:2], ("user", "dogs"), ("assistant", "about dogs")]


async def test_a_new_chat_during_an_edit_leaves_the_exchange_alone(
    make_app: MakeApp, clock: FakeClock, db_path: Path
) -> None:
    app = make_app(cats_backend(clock, "about dogs"))
    async with app.run_test(size=SIZE) as pilot:
        screen = await cats_then_f4(pilot)
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: screen.conversation is None)
        assert prompt_of(screen).text == ""
        await send(pilot, "dogs")
        await reply_done(pilot)
    assert stored(db_path) == [("user", "dogs"), ("assistant", "about dogs"), *BEFORE]
