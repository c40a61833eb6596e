"""A chat's thinking and a cut-off reply through export and import, on real files: they read
back as they were; an export from before them imports with the default thinking and no cut."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.core.chat import DEFAULT_THINKING, Thinking
from app.core.errors import ImportFailed
from app.files import write_atomic
from app.render.formats import FORMATS
from app.storage import ChatStore, MessageStatus
from app.storage.transfer.export import collect
from app.storage.transfer.importing import import_export

CUT = "the reply budget of 512 tokens"


def exported(tmp_path: Path, suffix: str) -> Path:
    """An export of a chat thinking with no cap whose reply was cut off."""
    with ChatStore.open(tmp_path / "source.db") as source:
        chat = source.create_conversation("Long story", thinking=Thinking(budget=None))
        source.add_user_message(chat.id, "Tell it all.")
        writer = source.start_reply(chat.id)
        writer.append(answer="Once upon", reasoning="Start slow.")
        writer.finish(MessageStatus.CUT, cut_reason=CUT)
        path = tmp_path / f"export{suffix}"
        write_atomic(path, FORMATS[suffix[1:]](collect(source)), replace=True)
    return path


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_thinking_and_a_cut_reply_read_back_after_an_import(tmp_path: Path, suffix: str) -> None:
    path = exported(tmp_path, suffix)
    with ChatStore.open(tmp_path / "target.db") as target:
        import_export(target, path)
    with ChatStore.open(tmp_path / "target.db") as reopened:
        (chat,) = reopened.list_conversations()
        question, reply = reopened.messages(chat.id)
    assert chat.thinking == Thinking(budget=None)
    assert (reply.status, reply.cut_reason, reply.content) == (MessageStatus.CUT, CUT, "Once upon")


def test_an_export_from_before_thinking_and_cut_replies_imports_with_the_defaults(
    tmp_path: Path,
) -> None:
    path = exported(tmp_path, ".json")
    document = json.loads(path.read_text())
    (conversation,) = document["conversations"]
    del conversation["thinking"]
    for message in conversation["messages"]:
        del message["cut_reason"]
        if message["status"] == "cut":
            message["status"] = "stopped"  # what an older ling-chat could have stored
    path.write_text(json.dumps(document))
    with ChatStore.open(tmp_path / "target.db") as target:
        import_export(target, path)
        (chat,) = target.list_conversations()
        reply = target.messages(chat.id)[-1]
    assert chat.thinking == DEFAULT_THINKING
    assert (reply.status, reply.cut_reason) == (MessageStatus.STOPPED, None)


@pytest.mark.parametrize(
    ("thinking", "message"),
    [
        ({"enabled": "yes", "budget": 5}, "conversations[0].thinking: thinking {'enabled': 'yes'"),
        ({"enabled": True, "budget": 0}, "a thinking budget is 1..131,072 tokens, not 0"),
        ({"enabled": True, "budget": 2.5}, "a thinking budget 2.5 is not a whole number"),
    ],
)
def test_a_bad_thinking_in_an_import_is_one_line_and_adds_nothing(
    tmp_path: Path, thinking: object, message: str
) -> None:
    path = exported(tmp_path, ".json")
    document = json.loads(path.read_text())
    document["conversations"][0]["thinking"] = thinking
    path.write_text(json.dumps(document))
    with ChatStore.open(tmp_path / "target.db") as target:
        with pytest.raises(ImportFailed) as caught:
            import_export(target, path)
        assert target.list_conversations() == []
    assert message in str(caught.value) and "\n" not in str(caught.value)
