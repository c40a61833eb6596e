"""Exports: each format parsed back, escaping, empty history."""

from __future__ import annotations

import csv
import io
import json
from html.parser import HTMLParser

import pytest

from app.core.chat import Sampling
from app.core.errors import StorageError
from app.render.figures import speed_line
from app.render.formats import FORMATS
from app.storage import ChatStore, EngineRun, MessageStatus, StoredMessage
from app.storage.transfer.export import CSV_COLUMNS, SCHEMA_VERSION, Export, collect
from app.telemetry import ReplyStats
from tests.support.scripted_backend import failing_report, passing_report
from tests.support.storage import STATS

SPEED = "52.3 tok/s · TPOT 19.1 ms · accept 3.12 (64 rounds) · TTFT 0.41 s"
HOSTILE = '<script>alert("pwned")</script> & <b>bold</b>'


@pytest.fixture
def filled(store: ChatStore) -> ChatStore:
    """A measured reply with reasoning; archived stopped and partial replies; an error."""
    run_id = store.record_engine_run(
        kind="engine", model="ling", sglang_version="0.5.23", profile="stack", proof={}
    )
    first = store.create_conversation(
        "Tags <i>&</i> more", system_prompt="Answer in one line.", model="ling"
    )
    store.add_user_message(first.id, HOSTILE)
    writer = store.start_reply(first.id, engine_run_id=run_id)
    writer.append(answer="Escaped, **promise**.", reasoning="They sent <script>; escape it.")
    writer.finish(MessageStatus.COMPLETE, STATS)

    second = store.create_conversation("Archived", sampling=Sampling(temperature=1.0))
    store.add_user_message(second.id, "Count to a million")
    writer = store.start_reply(second.id)
    writer.append("1, 2, 3")
    writer.finish(MessageStatus.STOPPED)
    store.add_user_message(second.id, "Go on")
    store.start_reply(second.id).append("4, 5")  # never finished: partial
    store.set_archived(second.id, True)

    third = store.create_conversation("Broken")
    store.add_user_message(third.id, "Hello?")
    store.start_reply(third.id).finish(MessageStatus.ERROR, error="engine crashed")
    return store


def render(export: Export, fmt: str) -> str:
    return "".join(FORMATS[fmt](export))


def test_json_holds_every_field_and_reads_back(filled: ChatStore) -> None:
    document = json.loads(render(collect(filled), "json"))

    assert document["schema_version"] == SCHEMA_VERSION == 2
    assert set(document) == {"schema_version", "exported_at", "engine_runs", "conversations"}
    assert [c["title"] for c in document["conversations"]] == [
        "Tags <i>&</i> more",
        "Archived",
        "Broken",
    ]
    first, second, third = document["conversations"]
    assert set(first) == {
        "id",
        "title",
        "system_prompt",
        "model",
        "sampling",
        "created_at",
        "updated_at",
        "archived",
        "thinking",
        "messages",
    }
    assert first["thinking"] == {"enabled": True, "budget": 2048}
    assert first["sampling"] == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 29,
        "max_new_tokens": 4096,
    }
    assert second["archived"] is True and second["sampling"]["temperature"] == 1.0
    question, reply = first["messages"]
    assert set(reply) == set(StoredMessage.__dataclass_fields__)
    assert question["content"] == HOSTILE and question["stats"] is None
    assert (reply["role"], reply["status"], reply["reasoning"]) == (
        "assistant",
        "complete",
        "They sent <script>; escape it.",
    )
    stats = reply["stats"]
    assert ReplyStats(**{**stats, "accept_histogram": tuple(stats["accept_histogram"])}) == STATS
    (run,) = document["engine_runs"]
    assert run["id"] == reply["engine_run_id"]
    assert (run["kind"], run["model"], run["sglang_version"], run["proof"]) == (
        "engine",
        "ling",
        "0.5.23",
        {},
    )
    assert [m["status"] for m in second["messages"]] == [
        "complete",
        "stopped",
        "complete",
        "partial",
    ]
    assert (third["messages"][1]["status"], third["messages"][1]["error"]) == (
        "error",
        "engine crashed",
    )


def test_jsonl_is_one_self_contained_conversation_per_line(filled: ChatStore) -> None:
    text = render(collect(filled), "jsonl")
    lines = [json.loads(line) for line in text.splitlines()]

    assert text.endswith("\n") and len(lines) == 3
    assert all(set(line) == {"schema_version", "engine_runs", "conversation"} for line in lines)
    assert all(line["schema_version"] == SCHEMA_VERSION for line in lines)
    assert [line["conversation"]["title"] for line in lines] == [
        "Tags <i>&</i> more",
        "Archived",
        "Broken",
    ]
    assert [len(line["engine_runs"]) for line in lines] == [1, 0, 0]  # only the runs it uses
    assert (
        lines[0]["conversation"] == json.loads(render(collect(filled), "json"))["conversations"][0]
    )


def test_markdown_reads_well_with_speed_lines_and_folded_reasoning(filled: ChatStore) -> None:
    text = render(collect(filled), "md")

    assert text.startswith("# Tags <i>&</i> more\n")
    assert f"_{SPEED}_" in text
    assert (
        "<details><summary>Reasoning</summary>\n\nThey sent <script>; escape it.\n\n</details>"
        in text
    )
    assert "> Answer in one line." in text
    assert "## You · " in text and "## Ling · " in text
    assert "_(stopped)_" in text
    assert "4, 5\n\n_(partial)_" in text
    assert "_(error: engine crashed)_" in text
    assert text.count("\n---\n") == 2
    assert text.index("Escaped, **promise**.") < text.index(SPEED)


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_is_one_self_contained_page_with_everything_escaped(filled: ChatStore) -> None:
    page = render(collect(filled), "html")
    parsed = _Collector()
    parsed.feed(page)

    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    assert "script" not in parsed.tags and "i" not in parsed.tags and "b" not in parsed.tags
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; &lt;b&gt;" in page
    assert HOSTILE in "".join(parsed.text)  # the text survives, as text
    assert "details" in parsed.tags and "style" in parsed.tags
    for external in ("<link", "<script", "src=", "href=", "url(", "@import"):
        assert external not in page
    assert SPEED in page
    assert "(stopped)" in page and "(error: engine crashed)" in page


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_an_empty_history_exports_a_valid_empty_document(store: ChatStore, fmt: str) -> None:
    text = render(collect(store), fmt)
    if fmt == "json":
        document = json.loads(text)
        assert (document["conversations"], document["engine_runs"]) == ([], [])
    elif fmt == "jsonl":
        assert text == ""
    elif fmt == "csv":
        assert text == ",".join(CSV_COLUMNS) + "\r\n"  # the header only (RFC 4180 line ends)
    else:
        assert "No conversations." in text


def test_collect_follows_the_given_ids_once_each(filled: ChatStore) -> None:
    export = collect(filled, [3, 1, 3])
    assert [t.conversation.id for t in export.threads] == [3, 1]
    assert list(export.engine_runs) == [1]
    with pytest.raises(StorageError, match="^no conversation 9$"):
        collect(filled, [1, 9])


def test_speed_line_shows_only_what_was_measured() -> None:
    assert speed_line(STATS) == SPEED
    assert speed_line(None) == ""
    unmeasured = ReplyStats(
        prompt_tokens=1,
        completion_tokens=1,
        ttft_s=0.5,
        latency_s=0.5,
        tpot_s=None,
        decode_tps=None,
    )
    assert speed_line(unmeasured) == "TTFT 0.50 s"


@pytest.mark.parametrize(
    "title",
    ['=HYPERLINK("http://x")', "+1+cmd", "-2+3", "@SUM(A1)", "\t=1", "\r=1", "\uff1dSUM(A1)"],
)
def test_a_csv_title_is_never_a_spreadsheet_formula(store: ChatStore, title: str) -> None:
    chat = store.create_conversation(title)
    store.add_user_message(chat.id, "hi")
    writer = store.start_reply(chat.id)
    writer.append(answer="ok", reasoning="")
    writer.finish(MessageStatus.COMPLETE, STATS)
    (row,) = csv.DictReader(io.StringIO(render(collect(store), "csv"), newline=""))
    assert row["title"] == "'" + title
    assert row["decode_tps"] == str(STATS.decode_tps)


FORMULA = '=HYPERLINK("http://evil.example","click")'


def test_no_csv_text_cell_is_a_spreadsheet_formula(store: ChatStore) -> None:
    run = store.record_engine_run(
        kind=FORMULA, model=FORMULA, sglang_version="+1+cmd", profile="@SUM(A1)", proof={}
    )
    chat = store.create_conversation("-2+3")
    store.add_user_message(chat.id, "hi")
    writer = store.start_reply(chat.id, engine_run_id=run)
    writer.append(answer="ok", reasoning="")
    writer.finish(MessageStatus.COMPLETE, STATS)
    (row,) = csv.DictReader(io.StringIO(render(collect(store), "csv"), newline=""))
    assert row["model"] == row["kind"] == "'" + FORMULA
    assert (row["title"], row["sglang_version"]) == ("'-2+3", "'+1+cmd")
    assert row["profile"] == "'@SUM(A1) (unproven)"  # no proof ran
    text_cells = [value for key, value in row.items() if key not in ("conversation_id",)]
    assert not any(cell.startswith(("=", "+", "-", "@")) for cell in text_cells)


@pytest.mark.parametrize("fmt", ["json", "jsonl"])
def test_json_escapes_what_a_terminal_acts_on_and_reads_back_exact(
    store: ChatStore, fmt: str
) -> None:
    hostile = "a\x1b]0;T\x07 \x9b2J \x7f \u202eevil\u2069 \U000e0041"
    chat = store.create_conversation(hostile)
    store.add_user_message(chat.id, hostile)
    text = render(collect(store), fmt)
    for char in "\x1b\x07\x9b\x7f\u202e\u2069\U000e0041":
        assert char not in text
    assert "\\u202e" in text and "\\udb40\\udc41" in text
    record = json.loads(text.splitlines()[0] if fmt == "jsonl" else text)
    conversation = record["conversation"] if fmt == "jsonl" else record["conversations"][0]
    assert conversation["title"] == hostile
    assert conversation["messages"][0]["content"] == hostile


@pytest.mark.parametrize(
    ("proof", "label"),
    [
        (passing_report().to_dict(), "stack"),
        (failing_report().to_dict(), "stack (unproven)"),
        ({}, "stack (unproven)"),  # no proof ran
        ({"profile": "stack", "lines": [{"verdict": "maybe"}]}, "stack (unproven)"),  # damaged
    ],
)
def test_a_run_s_profile_reads_unproven_unless_its_proof_passed(
    proof: dict[str, object], label: str
) -> None:
    run = EngineRun(1, "server", "m", "0.5.23", "stack", "", proof, "2026-01-01T00:00:00")
    assert run.profile_label == label
