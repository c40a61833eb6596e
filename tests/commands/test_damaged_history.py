"""Rows written straight into history.db with bad values: every command still reads them."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.cli import main
from app.core.chat import Sampling
from app.settings import load_settings
from app.storage import ChatStore, MessageStatus
from tests.support.storage import STATS

DAMAGE = {
    "sampling not JSON": "UPDATE conversations SET sampling = '{not json'",
    "sampling of wrong types": (
        """UPDATE conversations SET sampling = '{"temperature": "hot", "top_k": 2.5}'"""
    ),
    "sampling NaN": """UPDATE conversations SET sampling = '{"temperature": NaN}'""",
    "created_at no date": "UPDATE conversations SET created_at = 'not a date'",
    "updated_at a number": "UPDATE conversations SET updated_at = 7",
    "title a blob": "UPDATE conversations SET title = x'ff00'",
    "message created_at no date": "UPDATE messages SET created_at = 'yesterday'",
    "role unknown": "UPDATE messages SET role = 'robot'",
    "status unknown": "UPDATE messages SET status = 'weird'",
    "decode_tps infinite": "UPDATE measurements SET decode_tps = 1e999",
    "decode_tps a word": "UPDATE measurements SET decode_tps = 'fast'",
    "ttft negative": "UPDATE measurements SET ttft_s = -1",
    "tokens a word": "UPDATE measurements SET completion_tokens = 'many'",
    "histogram not JSON": "UPDATE measurements SET accept_histogram = '[1,'",
    "extra NaN": """UPDATE measurements SET extra = '{"cached_tokens": NaN, "x": Infinity}'""",
    "proof not JSON": "UPDATE engine_runs SET proof = 'nope'",
    "proof Infinity": """UPDATE engine_runs SET proof = '{"x": 1e999}'""",
}


@pytest.fixture(scope="module", params=DAMAGE.values(), ids=DAMAGE.keys())
def damaged_once(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A history with one kind of damage, built once for every command that reads it."""
    db_path = tmp_path_factory.mktemp("damaged") / "history.db"
    with ChatStore.open(db_path) as store:
        run = store.record_engine_run(
            kind="engine", model="ling", sglang_version="0.5.23", profile="stack", proof={}
        )
        chat = store.create_conversation("Pasta")
        store.add_user_message(chat.id, "How long?")
        writer = store.start_reply(chat.id, engine_run_id=run)
        writer.append(answer="Nine minutes.")
        writer.finish(MessageStatus.COMPLETE, STATS)
    with sqlite3.connect(db_path) as db:
        db.execute(request.param)
    db.close()
    return db_path


@pytest.fixture
def damaged(damaged_once: Path) -> Path:
    """A copy of the damaged history where the commands look for it (a command may write)."""
    db_path = load_settings().db_path  # LING_CHAT_DATA_DIR from the isolated_dirs fixture
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(damaged_once) as source, sqlite3.connect(db_path) as copy:
        source.backup(copy)
    source.close()
    copy.close()
    return db_path


@pytest.mark.parametrize(
    "argv",
    [
        ("history",),
        ("history", "show", "1"),
        ("history", "--search", "minutes"),
        ("history", "stats"),
        *(("export", "--format", fmt, "-o", "-") for fmt in ("md", "json", "jsonl", "html", "csv")),
    ],
    ids=" ".join,
)
def test_every_command_reads_a_damaged_history(
    damaged: Path, argv: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(list(argv)) == 0
    out = capsys.readouterr().out
    assert "nan" not in out.lower().replace("nano", "") and "inf tok/s" not in out
    if "json" in argv:
        json.loads(out, parse_constant=_refuse)
    if "jsonl" in argv:
        for line in out.splitlines():
            json.loads(line, parse_constant=_refuse)


def _refuse(constant: str) -> None:
    raise AssertionError(f"not strict JSON: {constant}")


def test_a_damaged_date_shows_as_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    db_path = load_settings().db_path
    with ChatStore.open(db_path) as store:
        store.create_conversation("Pasta")
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE conversations SET created_at = 'not a date'")
    db.close()
    assert main(["history", "show", "1"]) == 0
    assert "started unknown time" in capsys.readouterr().out


def test_an_empty_import_file_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.json"
    empty.touch()
    assert main(["import", str(empty)]) == 1
    assert capsys.readouterr().err == f"ling-chat: error: no conversations in {empty}\n"


def test_valid_stored_sampling_reads_back_as_it_was() -> None:
    sampling = Sampling(temperature=0.0, top_p=1.0, top_k=-1, max_new_tokens=7)
    with ChatStore.open(load_settings().db_path) as store:
        chat = store.create_conversation("off", sampling=sampling)
        assert store.get_conversation(chat.id).sampling == sampling
