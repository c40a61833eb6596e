"""Cut-off replies, Ctrl+G (continue) and the F3 thinking fields, through the real app under
Pilot on a real SQLite file (reopened to check what was stored), at 80x24 and 100x30.

The model side is the scripted backend double (tests/support/scripted_backend.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Checkbox, Input, Label, Markdown

from app.core.chat import PartialReply, Role, Thinking
from app.storage import ChatStore, MessageStatus, StoredMessage
from app.ui import LingChatApp
from app.ui.screens.dialogs import SettingsDialog
from app.ui.widgets.messages import ReplyView
from tests.support.pilot import Notices, chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

MakeApp = Callable[..., LingChatApp]
SMALL = pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
NOTHING = "There is no cut-off or stopped reply to continue."


def stored(db_path: Path) -> list[StoredMessage]:
    """The one conversation's messages, read from the file by a store of its own."""
    with ChatStore.open(db_path) as reopened:
        (conversation,) = reopened.list_conversations()
        return reopened.messages(conversation.id)


def footer(view: ReplyView) -> str:
    return text_of(view.query_one(".reply-footer", Label))


@SMALL
async def test_a_reply_cut_by_its_budget_is_stored_and_shown_as_cut_off_with_its_reason(
    make_app: MakeApp, backend: ScriptedBackendDouble, db_path: Path, size: tuple[int, int]
) -> None:
    backend.enqueue(answer_reply("Part ", "one", finish_reason="length"))
    async with make_app(backend).run_test(size=size) as pilot:
        await chat_screen(pilot)
        await send(pilot, "write a lot")
        screen = await reply_done(pilot)
        (view,) = screen.query(ReplyView)
        assert footer(view).startswith("✂ cut off: the reply budget of 4,096 tokens")
    question, reply = stored(db_path)
    assert (reply.status, reply.cut_reason) == (
        MessageStatus.CUT,
        "the reply budget of 4,096 tokens",
    )
    assert reply.content == "Part one" and reply.continuable


@SMALL
async def test_ctrl_g_continues_a_cut_reply_into_one_reply_whose_figures_sum_its_parts(
    make_app: MakeApp, backend: ScriptedBackendDouble, db_path: Path, size: tuple[int, int]
) -> None:
    limit = "the room left in the model's context (6 tokens)"
    backend.enqueue(
        answer_reply(
            "Part ",
            "one",
            reasoning=["Think."],
            finish_reason="length",
            cut_by=limit,
            usage={"verify_rounds": 3},
        ),
        answer_reply(" and", " two.", usage={"verify_rounds": 2}),
    )
    async with make_app(backend).run_test(size=size) as pilot:
        await chat_screen(pilot)
        await send(pilot, "write a lot")
        screen = await reply_done(pilot)
        (view,) = screen.query(ReplyView)
        assert footer(view).startswith(f"✂ cut off: {limit}")
        first = stored(db_path)[-1].stats
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: len(backend.requests) == 2)
        screen = await reply_done(pilot)
        (view,) = screen.query(ReplyView)  # the same reply, extended in place
        assert view.query_one(".answer", Markdown).source == "Part one and two."
        assert footer(view).startswith("✓")
    assert backend.partials == [None, PartialReply("Think.", "Part one")]
    messages, _ = backend.requests[1]
    assert [m.role for m in messages] == [Role.USER]  # the reply so far goes as `partial`
    question, reply = stored(db_path)
    assert (reply.content, reply.reasoning) == ("Part one and two.", "Think.")
    assert (reply.status, reply.cut_reason) == (MessageStatus.COMPLETE, None)
    stats = reply.stats
    assert first is not None and stats is not None
    assert stats.completion_tokens == 9 + 6  # three chunks of 3 tokens, then two
    assert stats.verify_rounds == 5
    assert stats.accept_length == pytest.approx(15 / 5)
    assert stats.ttft_s == first.ttft_s
    assert stats.latency_s > first.latency_s  # the continuation's time added


@SMALL
async def test_a_stopped_reply_continues_where_it_stopped(
    make_app: MakeApp, backend: ScriptedBackendDouble, db_path: Path, size: tuple[int, int]
) -> None:
    backend.enqueue(
        answer_reply("one ", "two ", "never", hold_after=2),
        answer_reply("three."),
    )
    async with make_app(backend).run_test(size=size) as pilot:
        await chat_screen(pilot)
        await send(pilot, "count")
        await wait_until(pilot, lambda: backend.chunks_sent == 2)
        await pilot.press("escape")
        await reply_done(pilot)
        assert stored(db_path)[-1].status is MessageStatus.STOPPED
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: len(backend.requests) == 2)
        await reply_done(pilot)
    assert backend.partials[-1] == PartialReply("", "one two ")
    (question, reply) = stored(db_path)
    assert (reply.content, reply.status) == ("one two three.", MessageStatus.COMPLETE)


async def test_ctrl_g_with_nothing_to_continue_says_so_in_one_line(
    make_app: MakeApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply("Done."))
    notices = Notices()
    async with make_app(backend).run_test(size=(80, 24), message_hook=notices) as pilot:
        await chat_screen(pilot)
        await pilot.press("ctrl+g")  # a new chat: nothing at all
        await wait_until(pilot, lambda: NOTHING in notices.messages)
        await send(pilot, "hi")
        await reply_done(pilot)
        notices.messages.clear()
        await pilot.press("ctrl+g")  # a complete reply
        await wait_until(pilot, lambda: NOTHING in notices.messages)
    assert len(backend.requests) == 1


async def test_a_continuation_the_backend_refuses_leaves_the_reply_as_it_was(
    make_app: MakeApp, backend: ScriptedBackendDouble, db_path: Path
) -> None:
    refusal = "this recording cannot continue the reply"
    backend.enqueue(
        answer_reply("Cut", finish_reason="length", usage={"verify_rounds": 1}),
        answer_reply(error=refusal),
    )
    notices = Notices()
    async with make_app(backend).run_test(size=(80, 24), message_hook=notices) as pilot:
        await chat_screen(pilot)
        await send(pilot, "q")
        await reply_done(pilot)
        before = stored(db_path)[-1]
        await pilot.press("ctrl+g")
        await wait_until(pilot, lambda: refusal in notices.messages)
        screen = await reply_done(pilot)
        (view,) = screen.query(ReplyView)
        assert footer(view).startswith("✂ cut off")
    assert stored(db_path)[-1] == before


@SMALL
async def test_f3_sets_the_chat_s_thinking_which_is_stored_and_asked_for(
    make_app: MakeApp, backend: ScriptedBackendDouble, db_path: Path, size: tuple[int, int]
) -> None:
    backend.enqueue(answer_reply("a"), answer_reply("b"))
    async with make_app(backend).run_test(size=size) as pilot:
        await chat_screen(pilot)
        await send(pilot, "first")
        await reply_done(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsDialog))
        dialog = pilot.app.screen
        budget = dialog.query_one("#thinking-budget", Input)
        assert budget.value == "2048" and dialog.query_one("#thinking", Checkbox).value
        budget.value = "lots"
        await pilot.press("ctrl+s")
        error = dialog.query_one("#settings-error", Label)
        await wait_until(pilot, lambda: "Thinking budget: 'lots'" in text_of(error))
        assert pilot.app.screen is dialog  # nothing saved
        budget.value = "512"
        dialog.query_one("#thinking", Checkbox).value = False
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(pilot.app.screen, SettingsDialog))
        await send(pilot, "second")
        await reply_done(pilot)
    assert backend.thinking_asked == [Thinking(), Thinking(enabled=False, budget=512)]
    with ChatStore.open(db_path) as reopened:
        (conversation,) = reopened.list_conversations()
    assert conversation.thinking == Thinking(enabled=False, budget=512)


async def test_a_new_chat_keeps_the_thinking_set_before_its_first_message(
    make_app: MakeApp, backend: ScriptedBackendDouble, db_path: Path
) -> None:
    backend.enqueue(answer_reply("a"))
    async with make_app(backend).run_test(size=(80, 24)) as pilot:
        await chat_screen(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsDialog))
        pilot.app.screen.query_one("#thinking-budget", Input).value = ""
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(pilot.app.screen, SettingsDialog))
        await send(pilot, "hi")
        await reply_done(pilot)
    assert backend.thinking_asked == [Thinking(budget=None)]
    with ChatStore.open(db_path) as reopened:
        (conversation,) = reopened.list_conversations()
    assert conversation.thinking == Thinking(budget=None)
