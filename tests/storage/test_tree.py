"""The message tree on a real SQLite file, across restarts: regenerated replies kept as
alternatives, an earlier message edited into a branch, the path on screen remembered, old
histories migrated into one path, exports and imports of every branch, search in every
branch."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sqlite_utils import Database

from app.core.errors import ImportFailed
from app.render.formats import FORMATS
from app.storage import ChatStore, MessageStatus
from app.storage.schema import MIGRATIONS
from app.storage.transfer.export import collect
from app.storage.transfer.importing import import_export
from app.storage.tree import alternatives
from app.ui.reply import request_messages

FIXTURES = Path(__file__).parents[1] / "fixtures"
NOW = "2026-12-01T00:00:00+00:00"


def reply(store: ChatStore, conversation_id: int, text: str, parent_id: int | None = None) -> int:
    writer = store.start_reply(conversation_id, parent_id=parent_id)
    writer.append(answer=text)
    done = writer.finish(MessageStatus.COMPLETE)
    assert done is not None
    return done.id


def texts(store: ChatStore, conversation_id: int) -> list[str]:
    return [m.content for m in store.messages(conversation_id)]


def place(store: ChatStore, conversation_id: int, message_id: int) -> tuple[int, int]:
    """(position, count) of a message among its alternatives, as the screen shows `2/3`."""
    siblings = [m.id for m in alternatives(store.all_messages(conversation_id), message_id)]
    return siblings.index(message_id) + 1, len(siblings)


def branched(store: ChatStore) -> int:
    """sheep → (about sheep | more sheep), cats → about cats, edited into dogs → about dogs;
    the dogs branch on screen."""
    chat = store.create_conversation("Animals", system_prompt="Be brief.")
    sheep = store.add_user_message(chat.id, "sheep").id
    reply(store, chat.id, "about sheep")
    reply(store, chat.id, "more sheep", parent_id=sheep)
    cats = store.add_user_message(chat.id, "cats").id
    reply(store, chat.id, "about cats")
    store.add_user_message(chat.id, "dogs", alternative_to=cats)
    reply(store, chat.id, "about dogs")
    return chat.id


def test_a_regenerated_reply_is_kept_as_2_of_2_and_the_choice_survives_a_restart(
    db_path: Path,
) -> None:
    with ChatStore.open(db_path) as store:
        chat = store.create_conversation()
        question = store.add_user_message(chat.id, "name a colour")
        first = reply(store, chat.id, "red")
        second = reply(store, chat.id, "blue", parent_id=question.id)
        assert texts(store, chat.id) == ["name a colour", "blue"]
        assert place(store, chat.id, second) == (2, 2)
    with ChatStore.open(db_path) as store:
        assert texts(store, chat.id) == ["name a colour", "blue"]
        store.choose(first)
    with ChatStore.open(db_path) as store:
        assert texts(store, chat.id) == ["name a colour", "red"]
        assert place(store, chat.id, first) == (1, 2)
        assert [m.content for m in store.all_messages(chat.id)] == ["name a colour", "red", "blue"]


def test_an_earlier_message_edited_keeps_both_branches_and_the_context_is_the_path(
    db_path: Path,
) -> None:
    with ChatStore.open(db_path) as store:
        chat = branched(store)
    with ChatStore.open(db_path) as store:
        path = store.messages(chat)
        assert [m.content for m in path] == ["sheep", "more sheep", "dogs", "about dogs"]
        sent = request_messages("Be brief.", path)
        assert [m.content for m in sent] == ["Be brief.", *[m.content for m in path]]
        dogs = path[2]
        assert place(store, chat, dogs.id) == (2, 2)
        (cats,) = [m for m in alternatives(store.all_messages(chat), dogs.id) if m.id != dogs.id]
        store.choose(cats.id)  # back to the first branch: its reply follows
    with ChatStore.open(db_path) as store:
        assert texts(store, chat) == ["sheep", "more sheep", "cats", "about cats"]
        assert len(store.all_messages(chat)) == 7
        store.add_user_message(chat, "and birds?")  # goes on from the path on screen
        assert texts(store, chat)[-2:] == ["about cats", "and birds?"]


def old_history(db_path: Path) -> None:
    """A history as today's schema (before m005) wrote it: two chats whose messages
    interleave, one with a reply that is measured."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with Database(db_path) as db:
        MIGRATIONS.apply(db, stop_before="m005_message_tree")
        for chat in (1, 2):
            db["conversations"].insert(
                {"id": chat, "title": f"chat {chat}", "system_prompt": "", "model": "m"}
                | {"sampling": "{}", "created_at": NOW, "updated_at": NOW}
            )
        rows = [(1, "user", "q1"), (2, "user", "r1"), (1, "assistant", "a1")]
        rows += [(2, "assistant", "s1"), (1, "user", "q2"), (1, "assistant", "a2 needle")]
        rows += [(2, "user", "r2")]
        for message_id, (chat, role, text) in enumerate(rows, start=1):
            db["messages"].insert(
                {"id": message_id, "conversation_id": chat, "role": role, "content": text}
                | {"reasoning": "", "status": "complete", "created_at": NOW, "updated_at": NOW}
            )
        db["measurements"].insert(
            {"message_id": 3, "prompt_tokens": 3, "completion_tokens": 26, "latency_s": 1.0}
        )


def test_a_history_of_today_s_schema_reads_the_same_chats_in_the_same_order(
    db_path: Path,
) -> None:
    old_history(db_path)
    with ChatStore.open(db_path) as store:
        assert [c.title for c in store.list_conversations()] == ["chat 2", "chat 1"]
        assert texts(store, 1) == ["q1", "a1", "q2", "a2 needle"]
        assert texts(store, 2) == ["r1", "s1", "r2"]
        assert [m.parent_id for m in store.messages(1)] == [None, 1, 3, 5]
        assert [m.stats is not None for m in store.messages(1)] == [False, True, False, False]
        assert [hit.message_id for hit in store.search("needle")] == [6]
        assert place(store, 1, 6) == (1, 1)
        store.add_user_message(2, "r3")
        reply(store, 2, "s3")
    with ChatStore.open(db_path) as store:
        assert texts(store, 2) == ["r1", "s1", "r2", "r3", "s3"]
        assert texts(store, 1) == ["q1", "a1", "q2", "a2 needle"]


def exported(db_path: Path, fmt: str, tmp_path: Path, name: str) -> Path:
    with ChatStore.open(db_path) as store:
        export = replace(collect(store), exported_at=NOW)  # the export's own time, fixed
        path = tmp_path / f"{name}.{fmt}"
        path.write_text("".join(FORMATS[fmt](export)))
    return path


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_a_branched_chat_round_trips_byte_identical(tmp_path: Path, fmt: str) -> None:
    source = tmp_path / "source.db"
    with ChatStore.open(source) as store:
        chat = branched(store)
        store.create_conversation("Second")
        store.choose(store.all_messages(chat)[4].id)  # "about cats": not the newest branch
    first = exported(source, fmt, tmp_path, "first")
    files = [first]
    for round_trip in (1, 2):
        target = tmp_path / f"target{round_trip}.db"
        with ChatStore.open(target) as store:
            assert import_export(store, files[-1]).conversations == 2
            assert texts(store, 1) == ["sheep", "more sheep", "cats", "about cats"]
            assert len(store.all_messages(1)) == 7
        files.append(exported(target, fmt, tmp_path, f"export{round_trip + 1}"))
    assert files[1].read_bytes() == files[2].read_bytes()
    document = first.read_text()
    assert '"parent_id"' in document and '"chosen"' in document


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_markdown_and_html_show_the_path_on_screen(store: ChatStore, fmt: str) -> None:
    branched(store)
    text = "".join(FORMATS[fmt](collect(store)))
    assert "about dogs" in text and "more sheep" in text
    assert "about cats" not in text and "about sheep" not in text


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_an_export_of_the_version_before_trees_imports_as_one_path(
    store: ChatStore, fmt: str
) -> None:
    before = json.loads((FIXTURES / "export_v1.json").read_text())
    assert before["schema_version"] == 1
    done = import_export(store, FIXTURES / f"export_v1.{fmt}")
    assert (done.conversations, done.skipped) == (2, 0)
    for chat in before["conversations"]:
        (found,) = [c for c in store.list_conversations() if c.title == chat["title"]]
        assert texts(store, found.id) == [m["content"] for m in chat["messages"]]
        assert [m.created_at for m in store.messages(found.id)] == [
            m["created_at"] for m in chat["messages"]
        ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"parent_id": 99}, r"messages\[1\]\.parent_id: 99 is not null or the id of an earlier"),
        ({"parent_id": "1"}, r"messages\[1\]\.parent_id: '1' is not null or the id"),
        ({"id": 1}, r"messages\[1\]\.id: 1 is not a whole number unique in its conversation"),
        ({"chosen": "yes"}, r"messages\[1\]\.chosen: a str, not true or false"),
    ],
)
def test_a_broken_parent_link_is_one_line_and_adds_nothing(
    store: ChatStore, tmp_path: Path, change: dict[str, object], message: str
) -> None:
    branched(store)
    document = json.loads("".join(FORMATS["json"](collect(store))))
    document["conversations"][0]["messages"][1].update(change)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(document))
    with ChatStore.open(tmp_path / "target.db") as target:
        with pytest.raises(ImportFailed, match=message) as caught:
            import_export(target, path)
        assert "\n" not in str(caught.value)
        assert target.list_conversations() == []


def test_search_finds_every_branch_and_choosing_a_hit_shows_its_branch(
    db_path: Path,
) -> None:
    with ChatStore.open(db_path) as store:
        chat = branched(store)
        assert texts(store, chat)[-1] == "about dogs"
        hits = store.search("about")
        assert sorted(h.snippet for h in hits) == [
            "«about» cats",
            "«about» dogs",
            "«about» sheep",
        ]
        assert store.count_matches("about") == 3
        (cats,) = [h for h in hits if h.snippet == "«about» cats"]
        store.choose(cats.message_id)
    with ChatStore.open(db_path) as store:
        assert texts(store, chat) == ["sheep", "more sheep", "cats", "about cats"]
        (sheep,) = [h for h in store.search("about sheep")]
        store.choose(sheep.message_id)  # the path below it follows its chosen children
        assert texts(store, chat) == ["sheep", "about sheep"]


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_importing_a_later_export_of_a_chat_adds_only_its_new_branch(
    tmp_path: Path, fmt: str
) -> None:
    source = tmp_path / "source.db"
    with ChatStore.open(source) as store:
        chat = store.create_conversation("Colours")
        question = store.add_user_message(chat.id, "a colour?")
        reply(store, chat.id, "red")
    before = exported(source, fmt, tmp_path, "before")
    with ChatStore.open(source) as store:
        reply(store, chat.id, "blue", parent_id=question.id)
    after = exported(source, fmt, tmp_path, "after")
    with ChatStore.open(tmp_path / "target.db") as target:
        assert import_export(target, before).conversations == 1
        done = import_export(target, after)
        assert (done.conversations, done.extended, done.skipped) == (0, 1, 0)
        (copied,) = target.list_conversations()
        assert [m.content for m in target.all_messages(copied.id)] == ["a colour?", "red", "blue"]
        assert texts(target, copied.id) == ["a colour?", "red"]  # the path stays as it was
        again = import_export(target, after)
        assert (again.conversations, again.extended, again.skipped) == (0, 0, 1)
        assert len(target.all_messages(copied.id)) == 3


def test_chats_imported_from_an_old_export_match_their_new_export(
    store: ChatStore, tmp_path: Path
) -> None:
    assert import_export(store, FIXTURES / "export_v1.json").conversations == 2
    path = tmp_path / "new.jsonl"
    path.write_text("".join(FORMATS["jsonl"](collect(store))))
    done = import_export(store, path)
    assert (done.conversations, done.extended, done.skipped) == (0, 0, 2)
    assert sum(len(store.all_messages(c.id)) for c in store.list_conversations()) == 8
