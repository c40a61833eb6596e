"""ReplyWriter: when text reaches the disk, and how each ending is stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.core.chat import Role
from app.core.errors import StorageError
from app.storage import ChatStore, Conversation, MessageStatus
from app.telemetry import ReplyStats
from tests.support.clock import FakeClock
from tests.support.storage import STATS

Committed = Callable[..., list[dict[str, Any]]]
ASSISTANT = "SELECT * FROM messages WHERE role = 'assistant'"


@pytest.fixture
def conversation(store: ChatStore) -> Conversation:
    conversation = store.create_conversation()
    store.add_user_message(conversation.id, "Tell me something.")
    return conversation


def test_the_row_appears_with_the_first_text_and_later_text_waits_for_the_interval(
    store: ChatStore, conversation: Conversation, clock: FakeClock, committed: Committed
) -> None:
    writer = store.start_reply(conversation.id, flush_interval_s=0.5, clock=clock)
    writer.append("", "")
    assert writer.message_id is None
    assert committed(ASSISTANT) == []

    writer.append(reasoning="Hmm.")
    (row,) = committed(ASSISTANT)
    assert (row["id"], row["status"], row["reasoning"], row["content"]) == (
        writer.message_id,
        "partial",
        "Hmm.",
        "",
    )

    clock.advance(0.3)
    writer.append("Hello")
    assert committed(ASSISTANT)[0]["content"] == ""  # inside the interval: not yet

    clock.advance(0.2)
    writer.append(", world")
    (row,) = committed(ASSISTANT)
    assert (row["content"], row["reasoning"], row["status"]) == ("Hello, world", "Hmm.", "partial")

    clock.advance(0.1)
    writer.append("!")
    assert committed(ASSISTANT)[0]["content"] == "Hello, world"
    writer.flush()
    assert committed(ASSISTANT)[0]["content"] == "Hello, world!"


def test_finish_complete_stores_text_measurements_and_engine_run_together(
    store: ChatStore, conversation: Conversation, committed: Committed
) -> None:
    run_id = store.record_engine_run(
        kind="engine", model="ling", sglang_version="0.5.23", profile="stack", proof={}
    )
    writer = store.start_reply(conversation.id, engine_run_id=run_id, flush_interval_s=60)
    writer.append(reasoning="think ")
    writer.append("answer", "harder")
    before = store.get_conversation(conversation.id).updated_at

    reply = writer.finish(MessageStatus.COMPLETE, STATS)

    assert reply is not None
    assert (reply.role, reply.content, reply.reasoning, reply.status, reply.error) == (
        Role.ASSISTANT,
        "answer",
        "think harder",
        MessageStatus.COMPLETE,
        None,
    )
    assert reply.stats == STATS
    assert reply.engine_run_id == run_id
    assert store.messages(conversation.id)[-1] == reply
    (measured,) = committed("SELECT * FROM measurements")
    assert (measured["message_id"], measured["engine_run_id"]) == (reply.id, run_id)
    assert store.get_conversation(conversation.id).updated_at > before


def test_stats_with_missing_values_round_trip(store: ChatStore, conversation: Conversation) -> None:
    sparse = ReplyStats(
        prompt_tokens=5,
        completion_tokens=1,
        ttft_s=None,
        latency_s=0.3,
        tpot_s=None,
        decode_tps=None,
    )
    writer = store.start_reply(conversation.id)
    writer.append("k")
    reply = writer.finish(MessageStatus.COMPLETE, sparse)
    assert reply is not None and reply.stats == sparse
    assert reply.engine_run_id is None


def test_stopped_and_failed_replies_keep_their_text(
    store: ChatStore, conversation: Conversation
) -> None:
    stopped = store.start_reply(conversation.id)
    stopped.append("Half an ans")
    stopped_reply = stopped.finish(MessageStatus.STOPPED)
    failed = store.start_reply(conversation.id)
    failed.append("Before the crash")
    failed_reply = failed.finish(MessageStatus.ERROR, error="scheduler died")

    assert stopped_reply is not None and failed_reply is not None
    assert (stopped_reply.status, stopped_reply.content, stopped_reply.stats) == (
        MessageStatus.STOPPED,
        "Half an ans",
        None,
    )
    assert (failed_reply.status, failed_reply.content, failed_reply.error) == (
        MessageStatus.ERROR,
        "Before the crash",
        "scheduler died",
    )
    assert store.messages(conversation.id)[1:] == [stopped_reply, failed_reply]


def test_an_error_before_any_text_is_stored_empty_with_the_error(
    store: ChatStore, conversation: Conversation
) -> None:
    writer = store.start_reply(conversation.id)
    reply = writer.finish(MessageStatus.ERROR, error="model not found")
    assert reply is not None
    assert (reply.content, reply.reasoning, reply.status, reply.error) == (
        "",
        "",
        MessageStatus.ERROR,
        "model not found",
    )
    assert writer.message_id == reply.id
    assert store.messages(conversation.id)[-1] == reply


@pytest.mark.parametrize("status", [MessageStatus.COMPLETE, MessageStatus.STOPPED])
def test_a_reply_without_text_leaves_no_row(
    store: ChatStore, conversation: Conversation, status: MessageStatus, committed: Committed
) -> None:
    writer = store.start_reply(conversation.id)
    writer.append("")
    assert writer.finish(status, STATS) is None
    assert committed(ASSISTANT) == []
    assert committed("SELECT * FROM measurements") == []


def test_a_finished_writer_refuses_more(store: ChatStore, conversation: Conversation) -> None:
    writer = store.start_reply(conversation.id)
    writer.append("done")
    writer.finish(MessageStatus.COMPLETE)
    with pytest.raises(RuntimeError):
        writer.append("more")
    with pytest.raises(RuntimeError):
        writer.finish(MessageStatus.COMPLETE)


def test_a_conversation_deleted_mid_reply_ends_quietly(
    store: ChatStore, conversation: Conversation, committed: Committed
) -> None:
    writer = store.start_reply(conversation.id, flush_interval_s=0)
    writer.append("streaming")
    store.delete_conversation(conversation.id)
    writer.append(" on")
    assert writer.finish(MessageStatus.COMPLETE, STATS) is None
    assert committed("SELECT * FROM messages") == []


def test_a_finish_that_cannot_be_stored_changes_nothing_and_can_be_retried(
    store: ChatStore, conversation: Conversation, committed: Committed
) -> None:
    writer = store.start_reply(conversation.id, flush_interval_s=60)
    writer.append("flushed")
    writer.append(" and buffered")
    broken = ReplyStats(
        prompt_tokens=1,
        completion_tokens=2,
        ttft_s=0.1,
        latency_s=None,  # type: ignore[arg-type]  # violates NOT NULL
        tpot_s=None,
        decode_tps=None,
    )
    with pytest.raises(StorageError):
        writer.finish(MessageStatus.COMPLETE, broken)
    (row,) = committed(ASSISTANT)
    assert (row["status"], row["content"]) == ("partial", "flushed")
    assert committed("SELECT * FROM measurements") == []

    reply = writer.finish(MessageStatus.COMPLETE, STATS)
    assert reply is not None and (reply.content, reply.stats) == ("flushed and buffered", STATS)


def test_extra_values_that_are_not_json_are_kept_as_text(
    store: ChatStore, conversation: Conversation
) -> None:
    odd = ReplyStats(
        prompt_tokens=1,
        completion_tokens=2,
        ttft_s=0.1,
        latency_s=0.2,
        tpot_s=None,
        decode_tps=None,
        extra={"path": Path("/tmp/trace")},
    )
    writer = store.start_reply(conversation.id)
    writer.append("x")
    reply = writer.finish(MessageStatus.COMPLETE, odd)
    assert reply is not None and reply.stats is not None
    assert reply.stats.extra == {"path": "/tmp/trace"}
