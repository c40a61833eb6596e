"""Attached files' names in the history: the migration from the schema before it, a message
that carries files across a restart, and exports and imports that keep the names."""

from __future__ import annotations

import json
from pathlib import Path

from sqlite_utils import Database

from app.core.chat import Role
from app.render.chats import html_page, markdown
from app.storage import ChatStore
from app.storage.schema import MIGRATIONS
from app.storage.transfer.export import as_json, collect
from app.storage.transfer.importing import import_export

NOW = "2026-12-01T00:00:00+00:00"


def test_a_history_from_before_attachments_opens_migrated_with_its_messages_unchanged(
    db_path: Path,
) -> None:
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with Database(db_path) as db:
        MIGRATIONS.apply(db, stop_before="m006_message_attachments")
        db["conversations"].insert(
            {"id": 1, "title": "t", "system_prompt": "", "model": "m", "sampling": "{}"}
            | {"created_at": NOW, "updated_at": NOW}
        )
        db["messages"].insert(
            {"id": 1, "conversation_id": 1, "role": "user", "content": "old question"}
            | {"reasoning": "", "status": "complete", "created_at": NOW, "updated_at": NOW}
        )
        assert "attachments" not in db["messages"].columns_dict
    with ChatStore.open(db_path) as store:
        (message,) = store.messages(1)
        added = store.add_user_message(1, "new", attachments=["a.md"])
    assert (message.content, message.attachments) == ("old question", ())
    assert added.attachments == ("a.md",)
    with Database(db_path) as db:
        assert "m006_message_attachments" in {m.name for m in MIGRATIONS.applied(db)}


def test_a_message_keeps_its_files_names_across_a_restart_and_in_every_export(
    db_path: Path, tmp_path: Path
) -> None:
    with ChatStore.open(db_path) as store:
        chat = store.create_conversation("files", system_prompt="", model="m")
        store.add_user_message(
            chat.id,
            "look\n\n--- file: notes.md ---\nhi\n--- end of file: notes.md ---",
            attachments=["notes.md", "log.txt"],
        )
        store.add_user_message(chat.id, "plain")
    with ChatStore.open(db_path) as store:
        attached, plain = store.messages(chat.id)
        export = collect(store, [chat.id])
    assert attached.attachments == ("notes.md", "log.txt")
    assert plain.attachments == ()
    assert attached.role is Role.USER
    assert "_Attached: notes.md, log.txt_" in "".join(markdown(export.threads))
    assert "Attached: notes.md, log.txt" in "".join(html_page(export.threads))
    document = json.loads("".join(as_json(export)))
    records = document["conversations"][0]["messages"]
    assert [record["attachments"] for record in records] == [["notes.md", "log.txt"], []]

    path = tmp_path / "export.json"
    path.write_text("".join(as_json(export)), encoding="utf-8")
    with ChatStore.open(tmp_path / "other" / "history.db") as target:
        import_export(target, path)
        (imported,) = target.list_conversations()
        names = [m.attachments for m in target.messages(imported.id)]
    assert names == [("notes.md", "log.txt"), ()]


def test_an_export_without_attachments_imports_as_none(tmp_path: Path) -> None:
    """Exports written before attachments existed carry no `attachments` key."""
    with ChatStore.open(tmp_path / "a" / "history.db") as source:
        chat = source.create_conversation("old", system_prompt="", model="m")
        source.add_user_message(chat.id, "hello")
        document = json.loads("".join(as_json(collect(source))))
    for message in document["conversations"][0]["messages"]:
        del message["attachments"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with ChatStore.open(tmp_path / "b" / "history.db") as target:
        import_export(target, path)
        (imported,) = target.list_conversations()
        assert [m.attachments for m in target.messages(imported.id)] == [()]
