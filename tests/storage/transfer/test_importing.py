"""Reading an export back: a round trip through JSON and JSONL, all or nothing, no doubles."""

from __future__ import annotations

import json
import os
import sqlite3
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.chat import MAX_TEXT_CHARS, Sampling
from app.core.errors import ImportFailed
from app.files import write_atomic
from app.render.formats import FORMATS
from app.storage import ChatStore, MessageStatus
from app.storage.transfer import import_file
from app.storage.transfer.export import collect
from app.storage.transfer.import_file import MAX_FILE_BYTES
from app.storage.transfer.importing import PRESENT, import_export
from tests.support.storage import STATS

IDS = {"id", "conversation_id", "engine_run_id", "exported_at"}
PROOF = {"profile": "stack", "lines": [], "facts": {"gpu": "H200"}}


@pytest.fixture
def source(tmp_path: Path) -> Iterator[ChatStore]:
    """Two conversations: a measured reply with its engine run; an archived stopped one."""
    store = ChatStore.open(tmp_path / "source.db")
    run = store.record_engine_run(
        kind="engine", model="ling", sglang_version="0.5.23", profile="stack", proof=PROOF
    )
    first = store.create_conversation(
        "Boiling pasta", system_prompt="Be brief.", model="ling", sampling=Sampling(top_k=7)
    )
    store.add_user_message(first.id, "How long?")
    writer = store.start_reply(first.id, engine_run_id=run)
    writer.append(answer="Nine minutes.", reasoning="Dried spaghetti.")
    writer.finish(MessageStatus.COMPLETE, STATS)
    second = store.create_conversation("Old taxes")
    store.add_user_message(second.id, "archived question")
    writer = store.start_reply(second.id)
    writer.append(answer="cut short")
    writer.finish(MessageStatus.STOPPED)
    store.set_archived(second.id, True)
    yield store
    store.close()


def export_file(store: ChatStore, path: Path) -> Path:
    write_atomic(path, FORMATS[path.suffix[1:]](collect(store)), replace=True)
    return path


def without_ids(value: Any) -> Any:
    """An export document with every id (they are new after an import) left out."""
    if isinstance(value, dict):
        return {k: without_ids(v) for k, v in value.items() if k not in IDS}
    if isinstance(value, list):
        return [without_ids(v) for v in value]
    return value


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_an_export_reads_back_whole_and_a_second_import_adds_nothing(
    source: ChatStore, tmp_path: Path, suffix: str
) -> None:
    path = export_file(source, tmp_path / f"export{suffix}")
    with ChatStore.open(tmp_path / "target.db") as target:
        done = import_export(target, path)
        assert (done.conversations, done.skipped) == (2, 0)
        again = import_export(target, path)
        assert (again.conversations, again.skipped) == (0, 2)
        copied = json.loads("".join(FORMATS["json"](collect(target))))
        assert len(copied["engine_runs"]) == 1  # reused, not added twice
        assert [hit.title for hit in target.search("spaghetti")] == ["Boiling pasta"]
    original = json.loads("".join(FORMATS["json"](collect(source))))
    assert without_ids(copied) == without_ids(original)


def test_a_malformed_record_adds_nothing(source: ChatStore, tmp_path: Path) -> None:
    path = export_file(source, tmp_path / "export.json")
    document = json.loads(path.read_text())
    document["conversations"][1]["messages"][0]["role"] = "robot"
    path.write_text(json.dumps(document))
    with ChatStore.open(tmp_path / "target.db") as target:
        with pytest.raises(
            ImportFailed, match=r"conversations\[1\]\.messages\[0\]\.role: 'robot' is not one of"
        ):
            import_export(target, path)
        assert target.list_conversations(include_archived=True) == []


def _stats(document: dict[str, Any]) -> dict[str, Any]:
    """The measured reply of an export document."""
    messages = (m for c in document["conversations"] for m in c["messages"])
    return next(m for m in messages if m["stats"] is not None)


MALFORMED: dict[str, Callable[[dict[str, Any]], None]] = {
    "engine_runs null": lambda d: d.update(engine_runs=None),
    "engine_runs 5": lambda d: d.update(engine_runs=5),
    "engine run id a list": lambda d: d["engine_runs"][0].update(id=[1]),
    "engine run started_at a list": lambda d: d["engine_runs"][0].update(started_at=[1]),
    "stats a string": lambda d: _stats(d).update(stats="fast"),
    "stats a list": lambda d: _stats(d).update(stats=[1, 2]),
    "stats 5": lambda d: _stats(d).update(stats=5),
    "stats tokens a list": lambda d: _stats(d)["stats"].update(prompt_tokens=[1]),
    "stats tokens null": lambda d: _stats(d)["stats"].update(prompt_tokens=None),
    "stats tokens too large": lambda d: _stats(d)["stats"].update(prompt_tokens=2**64),
    "sampling a string": lambda d: d["conversations"][0].update(sampling="hot"),
    "sampling a list": lambda d: d["conversations"][0].update(sampling=[0.2]),
    "sampling 5": lambda d: d["conversations"][0].update(sampling=5),
    "created_at a list": lambda d: d["conversations"][1].update(created_at=["2024"]),
    "title a list": lambda d: d["conversations"][1].update(title=["t"]),
    "message created_at a list": lambda d: _stats(d).update(created_at=["2024"]),
    "message updated_at a list": lambda d: _stats(d).update(updated_at=["2024"]),
    "message error an object": lambda d: _stats(d).update(error={"x": 1}),
    "message content a list": lambda d: _stats(d).update(content=["x", 1]),
    "message reasoning 5": lambda d: _stats(d).update(reasoning=5),
    "system_prompt an object": lambda d: d["conversations"][0].update(system_prompt={"a": 1}),
    "model null": lambda d: d["conversations"][0].update(model=None),
    "archived a string": lambda d: d["conversations"][0].update(archived="no"),
    "accept_histogram a string": lambda d: _stats(d)["stats"].update(accept_histogram="abc"),
}


@pytest.mark.parametrize("change", MALFORMED.values(), ids=MALFORMED.keys())
def test_a_record_of_wrong_types_is_one_line_naming_the_file_and_adds_nothing(
    source: ChatStore, tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    path = export_file(source, tmp_path / "export.json")
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))
    target_path = tmp_path / "target.db"
    with ChatStore.open(target_path) as target, pytest.raises(ImportFailed) as caught:
        import_export(target, path)
    assert str(caught.value).startswith(f"{path}: ")
    assert "\n" not in str(caught.value)
    with sqlite3.connect(target_path) as db:
        for table in ("engine_runs", "conversations", "messages", "measurements"):
            assert db.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
    db.close()


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_jsonl_line_holding_a_raw_line_separator_reads_back(
    source: ChatStore, tmp_path: Path
) -> None:
    path = tmp_path / "old.jsonl"
    lines = export_file(source, tmp_path / "export.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["conversation"]["messages"][0]["content"] = "one\u2028two\x85three"
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n")  # as older exports wrote
    with ChatStore.open(tmp_path / "target.db") as target:
        assert import_export(target, path).conversations == 1
        (chat,) = target.list_conversations()
        assert target.messages(chat.id)[0].content == "one\u2028two\x85three"


def test_a_key_given_twice_deep_inside_a_record_is_one_line(
    source: ChatStore, tmp_path: Path
) -> None:
    path = export_file(source, tmp_path / "export.jsonl")
    first, second = path.read_text().splitlines()
    path.write_text(first + "\n" + second.replace('"title": ', '"title": "x", "title": ', 1))
    with ChatStore.open(tmp_path / "target.db") as target, pytest.raises(ImportFailed) as caught:
        import_export(target, path)
    assert str(caught.value) == f"{path}:2: the key 'title' appears twice in one object"


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_a_file_that_would_never_end_or_fill_memory_is_one_line(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "export.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "huge":
        with path.open("wb") as sparse:
            sparse.truncate(MAX_FILE_BYTES + 1)
    else:
        path = Path("/dev/zero")
    why = "larger than 512 MiB" if kind == "huge" else "not a regular file"
    with ChatStore.open(tmp_path / "target.db") as target, pytest.raises(ImportFailed) as caught:
        import_export(target, path)
    assert str(caught.value) == f"cannot read {path}: {why}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"schema_version": 1, "conversations": []}\nnot json\n', r"export.jsonl:2: not JSON"),
        ('{"schema_version": 3, "conversations": []}', r"not a ling-chat export of schema"),
        ('{"schema_version": 1}', r"export.jsonl: no conversations"),
        ('{"schema_version": 1, "x": ' + "1" * 5000 + "}", r"export.jsonl.*digits"),
    ],
)
def test_a_file_that_is_no_export_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "export.jsonl"
    path.write_text(text)
    with ChatStore.open(tmp_path / "target.db") as target, pytest.raises(ImportFailed) as caught:
        import_export(target, path)
    assert "\n" not in str(caught.value)
    assert caught.match(message)


OUT_OF_RANGE: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "temperature a word": (
        lambda d: d["conversations"][0]["sampling"].update(temperature="hot"),
        r"conversations\[0\]\.sampling\.temperature: a str, not a number",
    ),
    "top_p 0": (
        lambda d: d["conversations"][0]["sampling"].update(top_p=0),
        r"conversations\[0\]\.sampling\.top_p: 0 is not a number above 0 and at most 1",
    ),
    "top_k 2.5": (
        lambda d: d["conversations"][0]["sampling"].update(top_k=2.5),
        r"sampling\.top_k: a float, not a whole number",
    ),
    "created_at no date": (
        lambda d: d["conversations"][1].update(created_at="not a date"),
        r"conversations\[1\]\.created_at: 'not a date' is not an ISO-8601 date",
    ),
    "message created_at no date": (
        lambda d: _stats(d).update(created_at="yesterday"),
        r"conversations\[0\]\.messages\[1\]\.created_at: 'yesterday' is not",
    ),
    "decode_tps infinite": (
        lambda d: _stats(d)["stats"].update(decode_tps=float("inf")),
        r"messages\[1\]\.stats\.decode_tps: inf is not a finite number$",
    ),
    "decode_tps NaN": (
        lambda d: _stats(d)["stats"].update(decode_tps=float("nan")),
        r"stats\.decode_tps: nan is not a finite number$",
    ),
    "ttft negative": (
        lambda d: _stats(d)["stats"].update(ttft_s=-0.5),
        r"stats\.ttft_s: -0\.5 is not a number at least 0",
    ),
    "tokens negative": (
        lambda d: _stats(d)["stats"].update(completion_tokens=-3),
        r"stats\.completion_tokens = -3 is not a count in 0\.\.1,000,000,000$",
    ),
    "tokens a string": (
        lambda d: _stats(d)["stats"].update(prompt_tokens="12"),
        r"stats\.prompt_tokens is '12', not a whole number$",
    ),
    "tokens a float": (
        lambda d: _stats(d)["stats"].update(prompt_tokens=9.5),
        r"stats\.prompt_tokens is 9\.5, not a whole number$",
    ),
    "histogram negative": (
        lambda d: _stats(d)["stats"].update(accept_histogram=[1, -2]),
        r"stats\.accept_histogram: an accept_histogram bin = -2 is not a count in "
        r"0\.\.1,000,000,000$",
    ),
    "histogram of 100,000 entries": (
        lambda d: _stats(d)["stats"].update(accept_histogram=[1] * 100_000),
        r"stats\.accept_histogram: 100,000 entries, over the limit of 64$",
    ),
    "a message past the text limit": (
        lambda d: _stats(d).update(content="x" * (MAX_TEXT_CHARS + 1)),
        r"conversations\[0\]\.messages\[1\]\.content: a text of 1,048,577 characters, over "
        r"the limit of 1,048,576$",
    ),
    "a title past the name limit": (
        lambda d: d["conversations"][1].update(title="t" * 1001),
        r"conversations\[1\]\.title: 1,001 characters, over the limit of 1,000$",
    ),
    "a deep value in stats.extra": (
        lambda d: _stats(d)["stats"]["extra"].update(deep=_nested(40)),
        r"conversations\[0\]\.messages\[1\]\.stats\.extra\.deep(\[0\])+: nested deeper than "
        r"32 levels$",
    ),
    "an infinite number in a proof": (
        lambda d: d["engine_runs"][0]["proof"]["facts"].update(gpu=float("inf")),
        r"engine_runs\[0\]\.proof\.facts\.gpu: inf is not a finite number$",
    ),
    "a deep value in a proof": (
        lambda d: d["engine_runs"][0]["proof"]["facts"].update(gpu=_nested(900)),
        r"engine_runs\[0\]\.proof\.facts\.gpu(\[0\])+: nested deeper than 32 levels$",
    ),
    "engine run started_at no date": (
        lambda d: d["engine_runs"][0].update(started_at="soon"),
        r"engine_runs\[0\]\.started_at: 'soon' is not",
    ),
    "message a string": (
        lambda d: d["conversations"][0]["messages"].append("hi"),
        r"conversations\[0\]\.messages\[2\]: a str, not an object",
    ),
}


@pytest.mark.parametrize(("change", "message"), OUT_OF_RANGE.values(), ids=OUT_OF_RANGE.keys())
def test_a_value_out_of_range_is_one_line_naming_the_record_and_field(
    source: ChatStore, tmp_path: Path, change: Callable[[dict[str, Any]], None], message: str
) -> None:
    path = export_file(source, tmp_path / "export.json")
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document))  # NaN and Infinity as Python's json writes them
    with ChatStore.open(tmp_path / "target.db") as target:
        with pytest.raises(ImportFailed) as caught:
            import_export(target, path)
        assert target.list_conversations(include_archived=True) == []
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"{path}: ")
    assert caught.match(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000, r"export.json: JSON nested deeper than 32 levels$"),
        (
            '{"schema_version": 1, "schema_version": 1, "conversations": []}',
            r"export.json: the key 'schema_version' appears twice in one object$",
        ),
        ("", r"no conversations in .*export.json$"),
        ("\n\n", r"no conversations in .*export.json$"),
        ('{"schema_version": 1, "conversations": []}', r"no conversations in .*export.json$"),
    ],
    ids=["deeply nested", "duplicate key", "empty", "blank lines", "no conversations"],
)
def test_a_file_with_nothing_to_import_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "export.json"
    path.write_text(text)
    with ChatStore.open(tmp_path / "target.db") as target, pytest.raises(ImportFailed) as caught:
        import_export(target, path)
    assert "\n" not in str(caught.value)
    assert caught.match(message)


def test_an_export_of_an_older_version_reads_its_counters_under_their_one_name(
    source: ChatStore, tmp_path: Path
) -> None:
    """Before one name per counter, exports said `verify_ct` and kept `cached_tokens` in
    `extra`; they import into `verify_rounds` and `cached_tokens`."""
    path = export_file(source, tmp_path / "export.json")
    document = json.loads(path.read_text())
    stats = _stats(document)["stats"]
    stats["verify_ct"] = stats.pop("verify_rounds")
    del stats["cached_tokens"]
    stats["extra"] = {**stats["extra"], "cached_tokens": 9}
    path.write_text(json.dumps(document))
    with ChatStore.open(tmp_path / "target.db") as target:
        import_export(target, path)
        copied = next(m.stats for m in target.messages(1) if m.stats is not None)
    assert (copied.verify_rounds, copied.cached_tokens, copied.extra) == (
        STATS.verify_rounds,
        9,
        STATS.extra,
    )


def test_a_bad_line_after_good_ones_adds_nothing(source: ChatStore, tmp_path: Path) -> None:
    """Conversations go in as they are read: a later line that fails takes them back out."""
    path = export_file(source, tmp_path / "export.jsonl")
    first, second = path.read_text().splitlines()
    broken = second.replace('"role": "user"', '"role": "robot"')
    path.write_text(f"{first}\n{broken}\n")
    with ChatStore.open(tmp_path / "target.db") as target:
        with pytest.raises(ImportFailed, match=r"export.jsonl:2: conversations\[1\]\.messages"):
            import_export(target, path)
        assert target.list_conversations(include_archived=True) == []


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_values_cut_across_every_read_read_back_whole(
    source: ChatStore, tmp_path: Path, suffix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read 5 bytes at a time, every number, string and multi-byte character is cut."""
    monkeypatch.setattr(import_file, "_PIECE", 5)
    source.rename(1, "Boiling pasta 🍝 — ünïcode")
    path = export_file(source, tmp_path / f"export{suffix}")
    with ChatStore.open(tmp_path / "target.db") as target:
        assert import_export(target, path).conversations == 2
        copied = json.loads("".join(FORMATS["json"](collect(target))))
    original = json.loads("".join(FORMATS["json"](collect(source))))
    assert without_ids(copied) == without_ids(original)


def test_a_document_with_its_conversations_first_is_read_whole_and_the_same(
    source: ChatStore, tmp_path: Path
) -> None:
    path = export_file(source, tmp_path / "export.json")
    document = json.loads(path.read_text())
    reordered = {"conversations": document.pop("conversations"), **document}
    path.write_text(json.dumps(reordered, indent=2))
    with ChatStore.open(tmp_path / "target.db") as target:
        assert import_export(target, path).conversations == 2
        copied = json.loads("".join(FORMATS["json"](collect(target))))
    assert len(copied["engine_runs"]) == 1
    assert _stats(copied)["engine_run_id"] == copied["engine_runs"][0]["id"]


def test_a_large_document_is_read_a_conversation_at_a_time(
    source: ChatStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory holds a piece of the file (64 KiB here) and one conversation, not the parsed
    file (which takes several times its size): the peak Python allocation is a fraction."""
    monkeypatch.setattr(import_file, "_PIECE", 1 << 16)
    path = export_file(source, tmp_path / "export.json")
    document = json.loads(path.read_text())
    template = document["conversations"][0]
    document["conversations"] = [{**template, "title": f"chat {i}"} for i in range(3000)]
    path.write_text(json.dumps(document, indent=2))
    size = path.stat().st_size
    with ChatStore.open(tmp_path / "target.db") as target:
        tracemalloc.start()
        try:
            assert import_export(target, path).conversations == 3000
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert size > 4 << 20
    assert peak < size / 8


def test_the_duplicate_check_reads_an_index(tmp_path: Path) -> None:
    with ChatStore.open(tmp_path / "target.db") as target:
        plan = target._connection.db.execute(f"EXPLAIN QUERY PLAN {PRESENT}", ["", ""]).fetchall()
    assert "USING COVERING INDEX" in plan[0][-1] or "USING INDEX" in plan[0][-1]
