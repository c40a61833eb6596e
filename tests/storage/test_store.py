"""Conversations and messages through ChatStore, checked against what is committed on disk."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.core.chat import Role, Sampling
from app.core.errors import StorageError
from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.storage import ChatStore, MessageStatus
from app.telemetry import ReplyStats

Committed = Callable[..., list[dict[str, Any]]]
STATS = ReplyStats(
    prompt_tokens=12,
    completion_tokens=40,
    ttft_s=0.4,
    latency_s=1.2,
    tpot_s=0.02,
    decode_tps=50.0,
    accept_length=3.1,
    accept_rate=0.7,
    verify_rounds=13,
    accept_histogram=(1, 2, 10),
)


def test_a_new_conversation_round_trips_with_its_settings(store: ChatStore, db_path: Path) -> None:
    sampling = Sampling(temperature=0.2, top_p=0.5, top_k=-1, max_new_tokens=77)
    created = store.create_conversation(
        "Trip", system_prompt="Be brief.", model="ling", sampling=sampling
    )
    store.close()

    with ChatStore.open(db_path) as again:
        loaded = again.get_conversation(created.id)
    assert loaded == created
    assert (loaded.title, loaded.system_prompt, loaded.model, loaded.sampling) == (
        "Trip",
        "Be brief.",
        "ling",
        sampling,
    )
    assert loaded.created_at == loaded.updated_at
    assert loaded.created_at.endswith("+00:00") and "T" in loaded.created_at
    assert not loaded.archived


def test_defaults_are_a_new_chat_with_default_sampling(store: ChatStore) -> None:
    conversation = store.create_conversation()
    assert (conversation.title, conversation.system_prompt, conversation.sampling) == (
        "New chat",
        "",
        Sampling(),
    )


def test_list_is_newest_updated_first_and_hides_archived(store: ChatStore) -> None:
    first = store.create_conversation("first")
    second = store.create_conversation("second")
    third = store.create_conversation("third")
    assert [c.title for c in store.list_conversations()] == ["third", "second", "first"]

    store.add_user_message(first.id, "bump")
    store.set_archived(second.id, True)

    assert [c.title for c in store.list_conversations()] == ["first", "third"]
    assert [c.title for c in store.list_conversations(include_archived=True)] == [
        "first",
        "third",
        "second",
    ]
    assert [c.id for c in store.list_conversations(limit=1)] == [first.id]
    store.set_archived(second.id, False)
    assert second.id in [c.id for c in store.list_conversations()]
    assert third.id in [c.id for c in store.list_conversations()]


def test_rename_archive_and_settings_are_committed(store: ChatStore, committed: Committed) -> None:
    conversation = store.create_conversation("old")
    store.rename(conversation.id, "new")
    store.set_archived(conversation.id, True)
    store.update_settings(conversation.id, system_prompt="Speak French.")
    store.update_settings(conversation.id, sampling=Sampling(temperature=1.5))

    (row,) = committed("SELECT * FROM conversations")
    assert (row["title"], row["archived"], row["system_prompt"]) == ("new", 1, "Speak French.")
    loaded = store.get_conversation(conversation.id)
    assert loaded.sampling == Sampling(temperature=1.5)
    assert loaded.system_prompt == "Speak French."  # a None argument kept it


def test_unknown_ids_raise_one_line_storage_errors(store: ChatStore) -> None:
    calls: list[Callable[[], object]] = [
        lambda: store.get_conversation(404),
        lambda: store.rename(404, "x"),
        lambda: store.set_archived(404, True),
        lambda: store.update_settings(404, system_prompt="x"),
        lambda: store.delete_conversation(404),
        lambda: store.messages(404),
        lambda: store.add_user_message(404, "hi"),
        lambda: store.start_reply(404),
    ]
    for call in calls:
        with pytest.raises(StorageError, match=r"^no conversation 404$"):
            call()
    with pytest.raises(StorageError, match=r"^no message 404$"):
        store.choose(404)
    with pytest.raises(StorageError, match=r"^no engine run 404$"):
        store.get_engine_run(404)
    assert store.list_conversations() == []  # nothing was half-written


def test_a_user_message_is_committed_and_bumps_updated_at(
    store: ChatStore, committed: Committed
) -> None:
    conversation = store.create_conversation()
    message = store.add_user_message(conversation.id, "Hello?")

    assert (message.role, message.content, message.status) == (
        Role.USER,
        "Hello?",
        MessageStatus.COMPLETE,
    )
    assert (message.reasoning, message.stats, message.error) == ("", None, None)
    (row,) = committed("SELECT * FROM messages")
    assert (row["id"], row["content"], row["status"]) == (message.id, "Hello?", "complete")
    assert store.get_conversation(conversation.id).updated_at == message.created_at
    assert message.created_at > conversation.updated_at
    assert store.messages(conversation.id) == [message]


def test_deleting_a_conversation_cascades_to_messages_measurements_and_search(
    store: ChatStore, committed: Committed
) -> None:
    doomed = store.create_conversation("doomed")
    kept = store.create_conversation("kept")
    store.add_user_message(doomed.id, "searchable needle")
    writer = store.start_reply(doomed.id)
    writer.append("needle reply")
    writer.finish(MessageStatus.COMPLETE, STATS)
    store.add_user_message(kept.id, "other")
    assert len(committed("SELECT * FROM measurements")) == 1

    store.delete_conversation(doomed.id)

    assert [row["content"] for row in committed("SELECT * FROM messages")] == ["other"]
    assert committed("SELECT * FROM measurements") == []
    assert store.search("needle") == []
    assert [c.id for c in store.list_conversations()] == [kept.id]


def test_message_counts_per_conversation(store: ChatStore) -> None:
    busy = store.create_conversation()
    empty = store.create_conversation()
    for text in ("a", "b", "c"):
        store.add_user_message(busy.id, text)
    assert store.message_counts() == {busy.id: 3}
    assert empty.id not in store.message_counts()


def test_engine_runs_keep_their_proof_and_its_summary(store: ChatStore) -> None:
    report = ProofReport(
        profile="stack",
        lines=(
            ProofLine("moe", "Humming MoE", Verdict.PASS, "kernel seen"),
            ProofLine("mtp", "NEXTN MTP", Verdict.FAIL, "accept 1.0", fix="check draft"),
            ProofLine("head", "FP8 head", Verdict.OFF, "off by request"),
        ),
        facts={"accept_length": 1.0},
    )
    run_id = store.record_engine_run(
        kind="engine",
        model="ling",
        sglang_version="0.5.23",
        profile="stack",
        proof=report.to_dict(),
    )
    run = store.get_engine_run(run_id)
    assert (run.kind, run.model, run.sglang_version, run.profile) == (
        "engine",
        "ling",
        "0.5.23",
        "stack",
    )
    assert run.proof_summary == "stack: 1 pass, 1 fail, 1 off"
    assert ProofReport.from_dict(run.proof) == report
    bare = store.record_engine_run(
        kind="replay", model="m", sglang_version="", profile="stack", proof={}
    )
    assert store.get_engine_run(bare).proof_summary == ""


def test_sampling_keys_from_another_version_are_ignored(store: ChatStore, db_path: Path) -> None:
    conversation = store.create_conversation()
    newer = '{"temperature": 0.1, "top_p": 0.9, "top_k": 5, "max_new_tokens": 9, "min_p": 0.2}'
    with sqlite3.connect(db_path) as other:
        other.execute("UPDATE conversations SET sampling = ?", [newer])
    other.close()
    assert store.get_conversation(conversation.id).sampling == Sampling(0.1, 0.9, 5, 9)


def test_a_deleted_chat_leaves_no_trace_in_the_files(db_path: Path) -> None:
    """Deleted text is overwritten, in the table, the search index and the WAL.

    The trigram index never stores the text whole, only its trigrams: 'xqj' and 'zeb'
    occur in no other text, so finding their bytes means the index kept the deleted text.
    """
    secret = "zebra-orchid-7731 xqj lives at the lighthouse"
    with ChatStore.open(db_path) as store:
        kept = store.create_conversation("kept")
        store.add_user_message(kept.id, "an ordinary question " * 20)
        gone = store.create_conversation("gone")
        store.add_user_message(gone.id, secret)
        writer = store.start_reply(gone.id)
        writer.append(answer=f"I will remember {secret}", reasoning=f"thinking of {secret}")
        writer.finish(MessageStatus.COMPLETE)
        store.delete_conversation(gone.id)
        files = [p for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)]
        traces = (b"zebra-orchid", b"xqj", b"zeb")
        leaked = [(p.name, t) for p in files for t in traces if t in p.read_bytes()]
        assert leaked == []
        assert [c.title for c in store.list_conversations()] == ["kept"]


def test_a_message_past_the_text_limit_is_refused_and_nothing_is_stored(
    store: ChatStore,
) -> None:
    chat = store.create_conversation()
    with pytest.raises(StorageError, match=r"^a message of 1,048,577 characters is over the limit"):
        store.add_user_message(chat.id, "x" * (1 << 20) + "y")
    assert store.messages(chat.id) == []
    store.add_user_message(chat.id, "x" * (1 << 20))  # the limit itself is taken
