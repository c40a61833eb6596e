"""Chatting: streaming replies into Markdown and storage, stop, regenerate, edit, copy."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widgets import Collapsible, Label, Markdown, Static, TextArea

from app.backend.protocol import DraftShape
from app.core.chat import Role, Sampling
from app.core.errors import BackendError, ConfigError
from app.core.exit_status import ExitStatus
from app.plumbing.logfile import logging_to
from app.storage import ChatStore, MessageStatus, StoredMessage
from app.ui import LingChatApp, reply_controller
from app.ui.screens.chat import ChatScreen
from app.ui.widgets.messages import ReplyView, UserMessage
from app.ui.widgets.speed_panel import draft_line
from tests.support.clock import FakeClock
from tests.support.pilot import (
    SIZE,
    Notices,
    chat_screen,
    reply_done,
    send,
    text_of,
    wait_until,
)
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply
from tests.support.storage import write_locked

MakeApp = Callable[..., LingChatApp]
CODE_ANSWER = ("Two ways:\n\n```python\nprint('one')\n```\n\nor\n\n```sh\necho two\n```\n",)


def only_chat(store: ChatStore) -> list[StoredMessage]:
    """The messages of the one conversation stored."""
    (conversation,) = store.list_conversations()
    return store.messages(conversation.id)


def last_reply(screen: ChatScreen) -> ReplyView:
    return list(screen.query(ReplyView))[-1]


async def first_chunk_held(
    pilot: Pilot[None], backend: ScriptedBackendDouble, question: str = "q"
) -> ChatScreen:
    """Send `question`; return once the backend holds its reply after the first chunk."""
    screen = await chat_screen(pilot)
    await send(pilot, question)
    await wait_until(pilot, lambda: backend.chunks_sent == 1)
    return screen


async def test_reply_streams_reasoning_apart_from_the_answer_and_is_stored(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(
        answer_reply(
            "Hello ",
            "**world**.",
            reasoning=["The user ", "greets me."],
            usage={"verify_rounds": 4},
        )
    )
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, "hi there")
        screen = await reply_done(pilot)
        view = last_reply(screen)
        assert view.query_one(".answer", Markdown).source == "Hello **world**."
        assert view.query_one(".reasoning", Markdown).source == "The user greets me."
        assert view.thinking.collapsed
        assert view.thinking.title == "Thinking · 4 words"
        footer = text_of(view.query_one(".reply-footer", Label))
        assert footer.startswith("✓") and "accept 3.00 (4 rounds)" in footer
        assert screen.sub_title == "hi there"
    user, reply = only_chat(store)
    assert (user.role, user.content) == (Role.USER, "hi there")
    assert (reply.content, reply.reasoning) == ("Hello **world**.", "The user greets me.")
    assert reply.status is MessageStatus.COMPLETE
    assert reply.stats is not None and reply.stats.accept_length == 3.0
    assert reply.engine_run_id == chat_app.engine_run_id
    messages, sampling = backend.requests[0]
    assert [(m.role, m.content) for m in messages] == [(Role.USER, "hi there")]
    assert sampling == Sampling()


async def test_user_message_is_committed_before_the_reply_arrives(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("a", "b", hold_after=0))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "question")
        await wait_until(pilot, lambda: backend.requests)
        (conversation,) = store.list_conversations()
        assert [m.content for m in store.messages(conversation.id)] == ["question"]
        backend.release()
        await reply_done(pilot)
        assert [m.content for m in store.messages(conversation.id)] == ["question", "ab"]
        assert screen.query(UserMessage)


async def test_send_right_after_a_burst_of_typing_sends_all_of_it(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    """Keys pasted or typed fast arrive in one burst; the send key must not overtake them."""
    backend.enqueue(answer_reply("ok"))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        for key, character in [("h", "h"), ("i", "i"), ("ctrl+s", None)]:
            chat_app.post_message(events.Key(key, character))
        await wait_until(pilot, lambda: backend.requests)
        assert [m.content for m in backend.requests[0][0]] == ["hi"]


async def test_a_stalled_reply_is_still_committed_to_the_store(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("first ", "second", " third", hold_after=2))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, "q")
        await wait_until(pilot, lambda: backend.chunks_sent == 2)
        (conversation,) = store.list_conversations()

        def stored() -> str:
            return store.messages(conversation.id)[-1].content

        await wait_until(pilot, lambda: stored() == "first second")
        assert store.messages(conversation.id)[-1].status is MessageStatus.PARTIAL
        backend.release()
        await reply_done(pilot)


async def test_escape_stops_the_reply_and_keeps_what_arrived(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("Partial ", "answer", " never sent", hold_after=2))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "go")
        await wait_until(pilot, lambda: backend.chunks_sent == 2)
        await pilot.press("escape")
        await reply_done(pilot)
        view = last_reply(screen)
        assert view.query_one(".answer", Markdown).source == "Partial answer"
        assert text_of(view.query_one(".reply-footer", Label)).startswith("■ stopped")
    assert backend.stop_calls == 1
    reply = only_chat(store)[-1]
    assert (reply.content, reply.status) == ("Partial answer", MessageStatus.STOPPED)
    assert reply.stats is not None and reply.stats.completion_tokens == 6


async def test_reply_error_is_stored_as_error_with_the_text_so_far(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(
        answer_reply("Half", error="scheduler died"),
        answer_reply("x", raise_error="server closed the stream"),
        answer_reply("y", raise_error=ConfigError("unknown profile 'fast'")),
        answer_reply("z"),
    )
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "one")
        await reply_done(pilot)
        footer = text_of(last_reply(screen).query_one(".reply-footer", Label))
        assert footer.startswith("✗ error: scheduler died")
        for prompt in ("two", "three", "four"):
            await send(pilot, prompt)
            await reply_done(pilot)
    replies = [m for m in only_chat(store) if m.role is Role.ASSISTANT]
    assert [(m.status, m.content, m.error) for m in replies] == [
        (MessageStatus.ERROR, "Half", "scheduler died"),
        (MessageStatus.ERROR, "x", "server closed the stream"),
        (MessageStatus.ERROR, "y", "unknown profile 'fast'"),
        (MessageStatus.COMPLETE, "z", None),
    ]
    # A failed reply is not sent back to the model as context.
    assert [m.content for m in backend.requests[1][0]] == ["one", "two"]


async def test_a_bug_in_a_reply_is_logged_with_its_traceback_and_not_stored_as_an_error(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, tmp_path: Path
) -> None:
    # What httpx raised for a NaN in the request: a bug, not a LingChatError. The reply
    # stops with what arrived, the traceback goes to the log, and the app goes on.
    unforeseen = ValueError("Out of range float values are not JSON compliant")
    backend.enqueue(answer_reply("Half", raise_error=unforeseen), answer_reply("next"))
    with logging_to(tmp_path / "logs") as log:
        notices = Notices()
        async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
            screen = await chat_screen(pilot)
            await send(pilot, "one")
            await reply_done(pilot)
            footer = text_of(last_reply(screen).query_one(".reply-footer", Label))
            assert footer.startswith(f"■ stopped: ValueError: {unforeseen}")
            (notice,) = notices.messages
            assert notice.startswith(f"ValueError: {unforeseen}. What arrived is kept")
            assert notice.endswith(f"the traceback is in {log}")
            await send(pilot, "two")
            await reply_done(pilot)
    logged = log.read_text(encoding="utf-8")
    assert "a bug ended the reply in conversation 1" in logged
    assert "Traceback (most recent call last)" in logged
    assert "raise reply.raise_error" in logged  # the frame that raised it
    replies = [m for m in only_chat(store) if m.role is Role.ASSISTANT]
    assert [(m.status, m.content, m.error) for m in replies] == [
        (MessageStatus.STOPPED, "Half", None),
        (MessageStatus.COMPLETE, "next", None),
    ]


async def test_a_bug_in_a_reply_s_worker_is_logged_and_the_reply_and_app_go_on(
    chat_app: LingChatApp,
    backend: ScriptedBackendDouble,
    store: ChatStore,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The loop that commits a stalled reply's text fails: a Textual worker that raised
    # would end the app; the controller's workers log it and the reply ends as it should.
    async def broken_flush(self: reply_controller.ReplyController) -> None:
        raise RuntimeError("flush broke")

    monkeypatch.setattr(reply_controller, "FLUSH_S", 0.01)
    monkeypatch.setattr(reply_controller.ReplyController, "_flush", broken_flush)
    backend.enqueue(answer_reply("All", " of", " it", hold_after=1))
    with logging_to(tmp_path / "logs") as log:
        async with chat_app.run_test(size=SIZE) as pilot:
            await chat_screen(pilot)
            await send(pilot, "one")
            await wait_until(pilot, lambda: "a reply worker failed" in log.read_text("utf-8"))
            backend.release()
            await reply_done(pilot)
            assert chat_app.is_running
    logged = log.read_text(encoding="utf-8")
    assert "RuntimeError: flush broke" in logged
    (reply,) = [m for m in only_chat(store) if m.role is Role.ASSISTANT]
    assert (reply.status, reply.content) == (MessageStatus.COMPLETE, "All of it")


async def test_regenerate_shows_a_new_reply_and_keeps_the_old_one(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("first"), answer_reply("second"))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "q")
        await reply_done(pilot)
        await pilot.press("ctrl+r")
        await reply_done(pilot)
        assert [view.answer for view in screen.query(ReplyView)] == ["second"]
        assert screen.query_one(ReplyView).border_title == "Ling · 2/2"
    assert [m.content for m in only_chat(store)] == ["q", "second"]
    assert [m.content for m in store.all_messages(store.list_conversations()[0].id)] == [
        "q",
        "first",
        "second",
    ]
    assert backend.requests[0][0] == backend.requests[1][0]


async def test_copy_reply_and_code_blocks_cycle_backwards(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply(*CODE_ANSWER))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, "code")
        await reply_done(pilot)
        await pilot.press("f5")
        assert chat_app.clipboard == CODE_ANSWER[0]
        await pilot.press("f6")
        assert chat_app.clipboard == "echo two"
        await pilot.press("f6")
        assert chat_app.clipboard == "print('one')"
        await pilot.press("f6")
        assert chat_app.clipboard == "echo two"


async def test_clicking_a_code_block_copies_it(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply(*CODE_ANSWER))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "code")
        await reply_done(pilot)
        fence = last_reply(screen).query("MarkdownFence").first()
        await pilot.click(fence)
        assert chat_app.clipboard == "print('one')"


async def test_thinking_block_toggles(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply("answer", reasoning=["hmm"]))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "x")
        await reply_done(pilot)
        thinking = last_reply(screen).query_one(Collapsible)
        assert thinking.collapsed
        await pilot.press("ctrl+t")
        assert not thinking.collapsed


async def test_history_is_shown_when_the_app_starts_again(
    make_app: MakeApp, clock: FakeClock, store: ChatStore
) -> None:
    conversation = store.create_conversation("Earlier")
    store.add_user_message(conversation.id, "old question")
    writer = store.start_reply(conversation.id)
    writer.append(answer="old answer", reasoning="old thoughts")
    writer.finish(MessageStatus.STOPPED)
    app = make_app(ScriptedBackendDouble(clock=clock))
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        assert screen.sub_title == "Earlier"
        assert [text_of(m) for m in screen.query(UserMessage)] == ["old question"]
        (view,) = screen.query(ReplyView)
        assert (view.answer, view.reasoning) == ("old answer", "old thoughts")
        assert text_of(view.query_one(".reply-footer", Label)) == "■ stopped"


async def test_quitting_mid_reply_stores_it_and_shuts_down(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("kept", " lost", hold_after=1))
    async with chat_app.run_test(size=SIZE) as pilot:
        await first_chunk_held(pilot, backend)
        await pilot.press("f1")  # quitting works from a dialog too
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: not chat_app.is_running)
    assert chat_app.return_code == 0
    assert (backend.stop_calls, backend.shutdown_calls) == (1, 1)
    reply = only_chat(store)[-1]
    assert (reply.content, reply.status) == ("kept", MessageStatus.STOPPED)


async def test_events_are_drained_even_when_drawing_is_slow(
    make_app: MakeApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    """The backend's stream is consumed at its own pace: drawing runs on a timer."""
    parts = [f"word{i} " for i in range(300)]
    backend.enqueue(answer_reply(*parts, hold_after=299))
    app = make_app(backend, refresh_hz=0.5)
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "long")
        await wait_until(pilot, lambda: backend.chunks_sent == 299)
        view = last_reply(screen)
        assert len(screen.run.answer) == len("".join(parts[:299]))  # type: ignore[union-attr]
        assert view.answer == ""  # nothing drawn yet at 0.5 Hz
        backend.release()
        await reply_done(pilot)
        assert view.query_one(".answer", Markdown).source == "".join(parts)


async def test_speed_panel_shows_live_numbers_then_the_final_ones(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(
        answer_reply(
            *"abcdef",
            tokens_per_chunk=3,
            hold_after=4,
            usage={"verify_rounds": 6, "cached_tokens": 7},
        )
    )
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "speed")
        numbers = screen.query_one("#reply-numbers", Static)
        await wait_until(pilot, lambda: "tokens   12" in text_of(numbers))
        live = text_of(numbers)
        assert "tok/step 3.00" in live and "300 tok/s" in live and "TTFT     0.01 s" in live
        backend.release()
        await reply_done(pilot)
        final = text_of(numbers)
        assert "accept   3.00" in final and "verify   6 rounds" in final
        assert "prompt   10 (7 cached)" in final
        assert "Session · 1 reply" in text_of(screen.query_one("#session-heading", Label))


@pytest.mark.parametrize(
    ("speculative", "row"), [(True, "draft    3 steps · 4 tokens"), (False, "draft    –")]
)
async def test_speed_panel_shows_the_draft_depth_in_use(
    make_app: MakeApp, clock: FakeClock, speculative: bool, row: str
) -> None:
    app = make_app(ScriptedBackendDouble(clock=clock, speculative=speculative))
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        assert text_of(screen.query_one("#draft", Static)) == row


@pytest.mark.parametrize(
    ("draft", "line"),
    [
        (DraftShape(3, 4), "3 steps · 4 tokens"),
        (DraftShape(1, 9, block=8), "block 8 · 9 tokens"),
        (DraftShape(1, 2), "1 step · 2 tokens"),
        (None, "–"),
    ],
)
def test_the_draft_line_names_steps_or_the_block(draft: DraftShape | None, line: str) -> None:
    assert draft_line(draft) == line


async def test_collapsed_accept_length_raises_the_banner(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply(*["t"] * 40, tokens_per_chunk=1, usage={"verify_rounds": 40}))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        banner = screen.query_one("#banner", Static)
        assert not banner.display
        await send(pilot, "x")
        await reply_done(pilot)
        assert banner.display
        assert "Speculative decoding has collapsed" in text_of(banner)


async def test_one_token_per_chunk_is_no_collapse_when_a_round_accepts_more(
    make_app: MakeApp,
) -> None:
    """A streamed chunk is not a verify round: 35 one-token chunks from 20 rounds (1.75 a
    round), streamed in real time, raise no banner, mid-reply or after."""
    backend = ScriptedBackendDouble(clock=time.perf_counter)
    usage = {"verify_rounds": 20, "completion_tokens": 35}
    backend.enqueue(answer_reply(*["t"] * 35, tokens_per_chunk=1, usage=usage, step_s=0.02))
    chat_app = make_app(backend, clock=time.perf_counter)
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        banner = screen.query_one("#banner", Static)
        await send(pilot, "x")
        await reply_done(pilot)
        assert "accept 1.75 (20 rounds)" in text_of(last_reply(screen).query_one(".reply-footer"))
        assert not banner.display


async def test_the_collapse_banner_shows_the_replys_accept_length(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    usage = {"verify_rounds": 40, "completion_tokens": 42}
    backend.enqueue(answer_reply(*["t"] * 14, tokens_per_chunk=3, usage=usage))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "x")
        await reply_done(pilot)
        footer = text_of(last_reply(screen).query_one(".reply-footer"))
        warning = text_of(screen.query_one("#banner", Static))
    (shown,) = re.findall(r"accept (\d+\.\d+) \(40 rounds\)", footer)
    (warned,) = re.findall(r"(\d+\.\d+) tokens per verify round over 40 rounds", warning)
    assert shown == warned == "1.05"


async def test_no_collapse_banner_without_speculative_decoding(
    make_app: MakeApp, clock: FakeClock
) -> None:
    backend = ScriptedBackendDouble(clock=clock, speculative=False)
    backend.enqueue(answer_reply(*["t"] * 40, tokens_per_chunk=1))
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "x")
        await reply_done(pilot)
        assert not screen.query_one("#banner", Static).display


async def test_escape_stops_the_reply_even_when_the_backend_cannot_stop_it(
    make_app: MakeApp, clock: FakeClock, store: ChatStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reply_controller, "STOP_GRACE_S", 0.2)
    backend = ScriptedBackendDouble(clock=clock, stop_error=BackendError("server went away"))
    backend.enqueue(answer_reply("Kept", " never sent", hold_after=1))
    app = make_app(backend)
    notices = Notices()
    async with app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await first_chunk_held(pilot, backend, "go")
        await pilot.press("escape")
        await reply_done(pilot)  # the grace timer cancelled the stream
        assert "Could not stop the reply: server went away" in notices.messages
        footer = text_of(last_reply(screen).query_one(".reply-footer", Label))
        assert footer.startswith("■ stopped")
    reply = only_chat(store)[-1]
    assert (reply.content, reply.status) == ("Kept", MessageStatus.STOPPED)


async def test_a_reply_whose_ending_cannot_be_stored_is_saved_once_the_database_is_free(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, db_path: Path
) -> None:
    backend.enqueue(answer_reply("Saved", " later", hold_after=1))
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await first_chunk_held(pilot, backend)
        with write_locked(db_path):
            backend.release()
            await reply_done(pilot)
            footer = screen.query_one(".reply-footer", Label)
            assert text_of(footer) == "… partial"  # not shown as complete while unsaved
            # A notice reaches the app as a message: wait for it, do not race it.
            await wait_until(
                pilot,
                lambda: any(
                    notice.startswith("Could not save the reply: ") and "is locked" in notice
                    for notice in notices.messages
                ),
            )
            # Only the first chunk, flushed before the lock, is in the file now.
            assert only_chat(store)[-1].content == "Saved"
        await wait_until(pilot, lambda: only_chat(store)[-1].content == "Saved later", timeout=10)
        assert text_of(last_reply(screen).query_one(".reply-footer", Label)).startswith("✓")
        await wait_until(
            pilot, lambda: "The reply that could not be saved is saved now." in notices.messages
        )
    reply = only_chat(store)[-1]
    assert (reply.status, reply.stats is not None) == (MessageStatus.COMPLETE, True)


async def test_a_reply_that_cannot_be_stored_mid_stream_is_stopped_and_saved_as_stopped(
    chat_app: LingChatApp,
    backend: ScriptedBackendDouble,
    store: ChatStore,
    db_path: Path,
    clock: FakeClock,
) -> None:
    backend.enqueue(answer_reply("Saved", " later", hold_after=1))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await first_chunk_held(pilot, backend)
        with write_locked(db_path):
            clock.advance(1.0)  # the next chunk is due to be flushed, and the flush fails
            backend.release()
            await reply_done(pilot)
        await wait_until(pilot, lambda: only_chat(store)[-1].content == "Saved later", timeout=10)
        assert text_of(last_reply(screen).query_one(".reply-footer", Label)).startswith("■")
    assert only_chat(store)[-1].status is MessageStatus.STOPPED


async def test_a_reply_still_unsaved_at_quit_is_written_to_a_file(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, db_path: Path
) -> None:
    backend.enqueue(answer_reply("Saved", " later", hold_after=1))
    async with chat_app.run_test(size=SIZE) as pilot:
        await first_chunk_held(pilot, backend, "what is kept?")
        with write_locked(db_path):
            backend.release()
            await reply_done(pilot)
            await chat_app.action_quit()
    (kept,) = db_path.parent.glob("unsaved-replies-*.md")
    text = kept.read_text(encoding="utf-8")
    assert "> what is kept?" in text and "Saved later" in text
    assert chat_app.return_code == ExitStatus.REPLY_UNSAVED
    assert only_chat(store)[-1].content == "Saved"  # what was flushed before the lock


async def test_sending_to_a_locked_database_is_a_one_line_error_and_keeps_the_text(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, db_path: Path
) -> None:
    backend.enqueue(answer_reply("late"))
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        prompt = screen.query_one("#prompt", TextArea)
        prompt.load_text("keep me")
        with write_locked(db_path):
            await pilot.press("ctrl+s")
            await wait_until(pilot, lambda: notices.messages)
        (notice,) = notices.messages
        assert notice.startswith(f"{db_path} is locked by another process")
        assert "\n" not in notice
        assert prompt.text == "keep me"
        assert store.list_conversations() == []
        await send(pilot, "keep me")  # the lock is gone: sending works again
        await reply_done(pilot)
    assert [m.content for m in only_chat(store)] == ["keep me", "late"]


async def test_a_first_message_that_cannot_be_stored_leaves_no_empty_chat(
    chat_app: LingChatApp, store: ChatStore, db_path: Path
) -> None:
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        with sqlite3.connect(db_path) as other:  # the chat can be created, its message not
            other.execute(
                "CREATE TRIGGER refuse_messages BEFORE INSERT ON messages"
                " BEGIN SELECT RAISE(ABORT, 'no room for messages'); END"
            )
        prompt = screen.query_one("#prompt", TextArea)
        prompt.load_text("hello")
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: notices.messages)
        assert notices.messages == [f"{db_path}: no room for messages"]
        assert prompt.text == "hello"
        assert screen.conversation is None
    assert store.list_conversations() == []


async def test_regenerating_on_a_locked_database_keeps_the_reply(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, db_path: Path
) -> None:
    backend.enqueue(answer_reply("first"), answer_reply("second"))
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "q")
        await reply_done(pilot)
        with write_locked(db_path):
            await pilot.press("ctrl+r")
            await wait_until(pilot, lambda: notices.messages)
        assert "is locked by another process" in notices.messages[0]
        assert screen.run is None
        assert [view.answer for view in screen.query(ReplyView)] == ["first"]
    assert [m.content for m in only_chat(store)] == ["q", "first"]
