"""ReplyRun: a reply counts as finished only once its ending is stored; ReplyView ends."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Label, Markdown

from app.backend.protocol import ReplyDone, TextChunk
from app.core.chat import Sampling
from app.core.errors import DatabaseLocked
from app.core.reply_usage import ReplyUsage
from app.storage import ChatStore, MessageStatus
from app.ui.reply import ReplyRequest, ReplyRun
from app.ui.widgets.messages import ReplyView
from tests.support.clock import FakeClock
from tests.support.pilot import text_of
from tests.support.storage import write_locked


def test_an_ending_that_cannot_be_stored_leaves_the_run_unfinished_and_close_retries_it(
    end_to_end: None, store: ChatStore, db_path: Path, clock: FakeClock
) -> None:
    conversation = store.create_conversation()
    writer = store.start_reply(conversation.id, flush_interval_s=60)
    run = ReplyRun(ReplyRequest(conversation.id, (), Sampling()), writer, clock)
    run.observe(TextChunk("flushed", "", 3, clock()))
    run.observe(TextChunk(" and buffered", "", 6, clock()))

    with write_locked(db_path), pytest.raises(DatabaseLocked):
        run.observe(ReplyDone("stop", ReplyUsage(completion_tokens=6, prompt_tokens=4), clock()))
    assert not run.finished
    assert (run.status, run.stats) == (None, None)

    run.close()
    assert run.status is MessageStatus.COMPLETE
    reply = store.messages(conversation.id)[-1]
    assert (reply.content, reply.status) == ("flushed and buffered", MessageStatus.COMPLETE)
    assert reply.stats == run.stats


def test_ttft_counts_from_the_moment_the_request_is_sent(
    store: ChatStore, clock: FakeClock
) -> None:
    conversation = store.create_conversation()
    run = ReplyRun(
        ReplyRequest(conversation.id, (), Sampling()), store.start_reply(conversation.id), clock
    )
    clock.advance(0.3)  # the UI mounting the reply view
    run.sent()
    clock.advance(0.1)
    run.observe(TextChunk("first", "", 1, clock()))
    assert run.ttft_s == pytest.approx(0.1)


class OneReply(App[None]):
    def compose(self) -> ComposeResult:
        yield ReplyView(streaming=True)


async def test_a_reply_ends_when_its_text_stream_is_stopped_before_it_ran(end_to_end: None) -> None:
    """Textual stops a Markdown stream by cancelling its task; one cancelled before its first
    step raised into the reply's end (on a loaded machine), and the reply never ended."""
    async with OneReply().run_test() as pilot:
        view = pilot.app.query_one(ReplyView)
        view.answer = "the whole answer"
        view._stream("answer")  # its task is created, and has not run yet
        await view.finish("✓ done")
        assert view.query_one(".answer", Markdown).source == "the whole answer"
        assert text_of(view.query_one(".reply-footer", Label)) == "✓ done"
