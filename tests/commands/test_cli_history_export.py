"""`ling-chat history` and `ling-chat export` end to end, on a real history file."""

from __future__ import annotations

import argparse
import csv
import json
import os
import stat
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from app.commands import export, history
from app.core.errors import LingChatError
from app.core.reply_usage import ReplyUsage
from app.settings import load_settings
from app.storage import ChatStore, MessageStatus
from app.telemetry import reply_stats
from tests.support.links import planted_link
from tests.support.scripted_backend import failing_report, passing_report
from tests.support.storage import STATS
from tests.support.timeouts import scaled


def cli(*argv: str) -> int:
    """`app.cli.main` once every command module exists; until then the same contract."""
    try:
        from app.cli import main
    except ImportError:
        return _main(argv)
    return main(list(argv))


def _main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="ling-chat")
    commands = parser.add_subparsers(dest="command", required=True)
    modules = {"history": history, "export": export}
    for name, module in modules.items():
        module.add_arguments(commands.add_parser(name, description=module.__doc__))
    args = parser.parse_args(argv)
    try:
        return int(modules[args.command].run(args))
    except LingChatError as exc:
        print(f"ling-chat: error: {exc}", file=sys.stderr)
        return 1


@pytest.fixture
def db_path() -> Path:
    return load_settings().db_path  # LING_CHAT_DATA_DIR from the isolated_dirs fixture


@pytest.fixture
def filled(db_path: Path) -> Path:
    with ChatStore.open(db_path) as store:
        pasta = store.create_conversation("Pasta <night>")
        store.add_user_message(pasta.id, "How long do I boil spaghetti?")
        writer = store.start_reply(pasta.id)
        writer.append(answer="About 9 minutes.", reasoning="Typical dried spaghetti.")
        writer.finish(MessageStatus.COMPLETE, STATS)
        old = store.create_conversation("Old taxes")
        store.add_user_message(old.id, "archived question")
        store.set_archived(old.id, True)
        store.create_conversation("Empty one")
    return db_path


def test_an_empty_history_says_so(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("history") == 0
    out = capsys.readouterr().out
    assert out.startswith("No conversations yet: `ling-chat` starts one on this machine's GPU, ")
    assert "`ling-chat --server URL`" in out and "`--replay demo`" in out and out.count("\n") == 1


def test_history_lists_newest_first_with_message_counts(
    filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("history") == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["ID", "UPDATED", "MSGS", "TITLE"]
    assert [(row.split()[0], row.split()[3], row.split()[4:]) for row in rows] == [
        ("3", "0", ["Empty", "one"]),
        ("1", "2", ["Pasta", "<night>"]),
    ]

    assert cli("history", "--all", "--limit", "2") == 0
    *rows, more = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["3", "2"]
    assert rows[1].endswith("Old taxes  (archived)")
    assert more == "1 more; --limit N shows N (--limit 0: all)"


def test_history_lists_50_conversations_unless_told_and_says_how_many_more(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: 100,002 rows, with no default limit."""
    with ChatStore.open(db_path) as store:
        for i in range(53):
            store.create_conversation(f"chat {i}")
    assert cli("history") == 0
    header, *rows, more = capsys.readouterr().out.splitlines()
    assert len(rows) == 50 and rows[0].endswith("chat 52")
    assert more == "3 more; --limit N shows N (--limit 0: all)"
    assert cli("history", "--limit", "0") == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 53
    assert cli("history", "--limit", "53") == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 53  # no "0 more"
    with pytest.raises(SystemExit):
        cli("history", "--limit", "-1")
    assert "'-1' is not a whole number, 0 or more" in capsys.readouterr().err


def test_history_search_uses_the_index(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("history", "--search", "spaghetti") == 0
    assert capsys.readouterr().out.splitlines() == [
        "1  #2  Ling  Pasta <night>: Typical dried «spaghetti».",
        "1  #1  You   Pasta <night>: How long do I boil «spaghetti»?",
    ]
    assert cli("history", "--search", 'no "such* thing') == 0
    assert capsys.readouterr().out == "No messages contain 'no \"such* thing'.\n"


def test_history_search_merges_identical_snippets_and_says_how_many_more(
    db_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ChatStore.open(db_path) as store:
        chat = store.create_conversation("Pings")
        for text in ["ping pong", "ping pong", "ping 1", "ping 2", "ping 3"]:
            store.add_user_message(chat.id, text)
        other = store.create_conversation("Elsewhere")
        store.add_user_message(other.id, "ping pong")
    assert cli("history", "--search", "ping") == 0
    assert capsys.readouterr().out.splitlines() == [
        "2  #6     You   Elsewhere: «ping» pong",
        "1  #5     You   Pings: «ping» 3",
        "1  #4     You   Pings: «ping» 2",
        "1  #3     You   Pings: «ping» 1",
        "1  #2 #1  You   Pings: «ping» pong",
    ]
    assert cli("history", "--search", "ping", "--limit", "3") == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "3 more; narrow the search or use --limit (0: all)"
    )
    assert cli("history", "--search", "ping", "--limit", "0") == 0
    assert len(capsys.readouterr().out.splitlines()) == 5


def test_history_show_prints_one_conversation(
    filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("history", "show", "1") == 0
    out = capsys.readouterr().out
    assert out.startswith("#1 Pasta <night>\nstarted ")
    assert "\nYou · " in out and "\n  How long do I boil spaghetti?\n" in out
    assert "\nLing · " in out and "  │ Typical dried spaghetti.\n" in out
    speed = "52.3 tok/s · TPOT 19.1 ms · accept 3.12 (64 rounds) · TTFT 0.41 s"
    assert f"  About 9 minutes.\n  {speed}\n" in out


def test_history_show_of_an_unknown_id_is_a_one_line_error(
    filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("history", "show", "42") == 1
    assert capsys.readouterr().err == "ling-chat: error: no conversation 42\n"


def test_data_dir_flag_picks_the_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ChatStore.open(tmp_path / "elsewhere" / "history.db") as store:
        store.create_conversation("Elsewhere")
    assert cli("history", "--data-dir", str(tmp_path / "elsewhere")) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("Elsewhere")


def test_export_defaults_to_markdown_in_the_current_folder(
    filled: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli("export") == 0
    (written,) = tmp_path.glob("ling-chat-export-*.md")
    assert capsys.readouterr().out == f"Exported 3 conversations to {written.name}\n"
    text = written.read_text()
    assert "# Old taxes" in text  # archived ones are exported too
    assert "_52.3 tok/s · TPOT 19.1 ms · accept 3.12 (64 rounds) · TTFT 0.41 s_" in text


def test_export_picks_the_format_from_the_suffix_and_ids(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "two.json"
    assert cli("export", "--id", "3", "--id", "1", "-o", str(out)) == 0
    assert capsys.readouterr().out == f"Exported 2 conversations to {out}\n"
    document = json.loads(out.read_text())
    assert [c["id"] for c in document["conversations"]] == [3, 1]


@pytest.mark.parametrize("name", ["x.pdf", "notes.txt", "x.markdown"])
def test_export_to_an_unknown_extension_is_one_line_and_writes_nothing(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    out = tmp_path / name
    assert cli("export", "-o", str(out)) == 1
    suffix = out.suffix
    assert capsys.readouterr().err == (
        f"ling-chat: error: -o {out}: ling-chat cannot write {suffix} files; it writes .md, "
        ".json, .jsonl, .html, .csv (or --format FORMAT for any name)\n"
    )
    assert list(tmp_path.iterdir()) == []
    assert cli("export", "--format", "md", "-o", str(out)) == 0  # a format given: any name
    assert out.read_text().startswith("# ")


def test_export_html_to_stdout(filled: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("export", "--id", "1", "--format", "html", "-o", "-") == 0
    page = capsys.readouterr().out
    assert page.startswith("<!doctype html>")
    assert "<title>Pasta &lt;night&gt;</title>" in page


def test_export_jsonl_of_an_empty_history_is_an_empty_file(
    db_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "none.jsonl"
    assert cli("export", "-o", str(out)) == 0
    assert out.read_text() == ""
    assert capsys.readouterr().out == f"Exported 0 conversations to {out}\n"


def test_export_of_an_unknown_id_writes_nothing(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "x.md"
    assert cli("export", "--id", "7", "-o", str(out)) == 1
    assert capsys.readouterr().err == "ling-chat: error: no conversation 7\n"
    assert not out.exists()


def test_export_to_a_closed_pipe_ends_quietly(end_to_end: None, filled: Path) -> None:
    """`ling-chat export -o - | head`: the reader leaving early is no error."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "export", "-o", "-"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # before ling-chat has written anything
    _, err = proc.communicate(timeout=scaled(60))
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err


def test_an_archived_conversation_leaves_the_list_until_unarchived(
    filled: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("history", "archive", "1") == 0
    assert capsys.readouterr().out == "#1 Pasta <night>: archived\n"
    cli("history")
    assert "Pasta" not in capsys.readouterr().out
    cli("history", "--all")
    assert "Pasta <night>  (archived)" in capsys.readouterr().out
    assert cli("history", "unarchive", "1") == 0
    capsys.readouterr()
    cli("history")
    assert "Pasta <night>\n" in capsys.readouterr().out
    assert cli("history", "archive", "42") == 1
    assert capsys.readouterr().err == "ling-chat: error: no conversation 42\n"


def test_backup_copies_the_history_and_replaces_a_file_only_with_force(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "copy.db"
    assert cli("history", "backup", str(copy)) == 0
    assert capsys.readouterr().out == f"Backed up 3 conversations to {copy}\n"
    with ChatStore.open(copy) as backup, ChatStore.open(filled) as original:
        assert backup.list_conversations() == original.list_conversations()
        first = original.list_conversations()[0].id
        assert backup.messages(first) == original.messages(first)
        original.create_conversation("Later")
    before = copy.read_bytes()
    assert cli("history", "backup", str(copy)) == 1
    assert capsys.readouterr().err == (
        f"ling-chat: error: {copy} exists already: --force replaces it\n"
    )
    assert copy.read_bytes() == before
    assert cli("history", "backup", "--force", str(copy)) == 0
    assert capsys.readouterr().out == f"Backed up 4 conversations to {copy}\n"
    with ChatStore.open(copy) as backup:
        assert backup.list_conversations()[0].title == "Later"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("copy")) == ["copy.db"]


LINK_REFUSED = (
    "it is a symbolic link, and ling-chat never writes through one (name the file itself)"
)


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A file of someone else's, and a link to it where ling-chat is asked to write."""
    return planted_link(tmp_path, "out.json")


@pytest.mark.parametrize("force", [[], ["--force"]], ids=["plain", "force"])
@pytest.mark.parametrize("command", [["export", "-o"], ["history", "backup"]])
def test_export_and_backup_never_write_through_a_link(
    filled: Path,
    planted: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    force: list[str],
) -> None:
    link, victim = planted
    assert cli(*command, str(link), *force) == 1
    assert capsys.readouterr().err == f"ling-chat: error: cannot write {link}: {LINK_REFUSED}\n"
    assert link.readlink() == victim
    assert victim.read_text() == "keep"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644


@pytest.mark.parametrize("command", [["export", "-o"], ["history", "backup"]])
def test_export_and_backup_to_a_dangling_link_create_nothing(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    (tmp_path / "elsewhere").mkdir()
    victim = tmp_path / "elsewhere" / "created"
    link = tmp_path / "out.json"
    link.symlink_to(victim)
    assert cli(*command, str(link), "--force") == 1
    assert capsys.readouterr().err == f"ling-chat: error: cannot write {link}: {LINK_REFUSED}\n"
    assert not victim.exists()
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["elsewhere", "out.json"]


def test_export_replaces_a_file_only_with_force_and_keeps_it_private(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.md"
    out.write_text("mine")
    out.chmod(0o644)
    assert cli("export", "-o", str(out)) == 1
    assert (
        capsys.readouterr().err == f"ling-chat: error: {out} exists already: --force replaces it\n"
    )
    assert out.read_text() == "mine"
    assert cli("export", "-o", str(out), "--force") == 0
    assert out.read_text().startswith("# ")
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert list(tmp_path.iterdir()) == [out]


@pytest.fixture
def measured(db_path: Path) -> Path:
    """Replies at growing context on two engines, one failed reply, one never measured."""
    with ChatStore.open(db_path) as store:
        engine, replay = (
            store.record_engine_run(
                kind=kind, model=model, sglang_version="0.5.23", profile="stack", proof=proof
            )
            for kind, model, proof in (
                ("engine", "Ling-3.0-flash", passing_report().to_dict()),
                ("server", "h200", failing_report().to_dict()),  # chatted with anyway
            )
        )
        chat = store.create_conversation('Long, "quoted" chat')
        for prompt, decode_s, status, run in (
            (300, 2.0, MessageStatus.COMPLETE, engine),
            (1500, 4.0, MessageStatus.STOPPED, engine),
            (1600, 1.0, MessageStatus.ERROR, engine),  # not in the speed table
            (9000, 5.0, MessageStatus.COMPLETE, replay),
        ):
            store.add_user_message(chat.id, f"question at {prompt}")
            writer = store.start_reply(chat.id, engine_run_id=run)
            writer.append(answer="ok", reasoning="")
            usage = ReplyUsage(completion_tokens=101, prompt_tokens=prompt, verify_rounds=25)
            writer.finish(status, reply_stats(0.0, [0.5], usage, 0.5 + decode_s))
        store.add_user_message(chat.id, "never answered")
    return db_path


def test_history_stats_shows_speed_by_context_per_engine(
    measured: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("history", "stats") == 0
    engine, replay = capsys.readouterr().out.strip().split("\n\n")
    engine_lines = engine.splitlines()
    assert engine_lines[0] == "Ling-3.0-flash · stack · engine: 2 replies"
    assert engine_lines[2].split()[:2] == ["<1K", "1"]
    assert engine_lines[2].split()[-3:] == ["50.0", "0.50", "4.04"]  # 100 tokens in 2 s
    assert engine_lines[3].split()[:2] == ["1K-2K", "1"]  # the failed reply is left out
    assert engine_lines[3].split()[-3] == "25.0"
    assert len(engine_lines) == 4
    assert replay.splitlines()[0] == "h200 · stack (unproven) · server: 1 reply"
    assert replay.splitlines()[2].split()[:2] == ["8K-16K", "1"]


def test_history_stats_without_measured_replies_says_so(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli("history", "stats") == 0  # `filled` has one reply, measured with no engine run
    assert capsys.readouterr().out.startswith("engine unknown: 1 reply\n")
    assert cli("history", "--data-dir", str(tmp_path / "fresh"), "stats") == 0
    assert capsys.readouterr().out == "No measured replies yet.\n"


def test_export_csv_has_one_row_per_measured_reply(
    measured: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "speed.csv"
    assert cli("export", "-o", str(out)) == 0
    rows = list(csv.DictReader(out.read_text(encoding="utf-8").splitlines()))
    assert [(r["status"], r["prompt_tokens"], r["kind"], r["profile"]) for r in rows] == [
        ("complete", "300", "engine", "stack"),
        ("stopped", "1500", "engine", "stack"),
        ("error", "1600", "engine", "stack"),
        ("complete", "9000", "server", "stack (unproven)"),  # before: `stack`, unproven
    ]
    first = rows[0]
    assert first["title"] == 'Long, "quoted" chat'
    assert float(first["decode_tps"]) == pytest.approx(50.0)
    assert first["accept_rate"] == ""  # not reported: blank, not "None"
    assert first["model"] == "Ling-3.0-flash" and first["sglang_version"] == "0.5.23"


def test_import_reads_an_export_back_into_another_history(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "all.jsonl"
    assert cli("export", "-o", str(exported)) == 0
    other = str(tmp_path / "other")
    assert cli("import", "--data-dir", other, str(exported)) == 0
    assert cli("import", "--data-dir", other, str(exported)) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        f"Imported 3 conversations from {exported}",
        f"Imported 0 conversations from {exported} (3 already there, skipped)",
    ]
    assert cli("import", "--data-dir", other, str(tmp_path / "missing.json")) == 1
    assert capsys.readouterr().err.startswith("ling-chat: error: cannot read ")


def test_import_of_a_later_export_adds_the_branch_a_chat_lacked_and_history_shows_its_path(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    assert cli("export", "-o", str(before)) == 0
    with ChatStore.open(filled) as store:
        (question, _) = store.messages(1)
        writer = store.start_reply(1, parent_id=question.id)
        writer.append(answer="Nine minutes, or taste one.")
        writer.finish(MessageStatus.COMPLETE)
    assert cli("export", "-o", str(after)) == 0
    other = str(tmp_path / "other")
    assert cli("import", "--data-dir", other, str(before)) == 0
    assert cli("import", "--data-dir", other, str(after)) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"Imported 0 conversations from {after} (1 already there, given the messages it "
        "lacked; 2 already there, skipped)"
    )
    assert cli("history", "show", "1") == 0
    shown = capsys.readouterr().out
    assert "Nine minutes, or taste one." in shown and "About 9 minutes." not in shown
    assert cli("history", "--data-dir", other, "show", "1") == 0
    shown = capsys.readouterr().out
    assert "About 9 minutes." in shown and "Nine minutes" not in shown  # its path as it was


def test_import_draws_no_bar_when_stderr_is_no_terminal(
    filled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exported = tmp_path / "all.json"
    assert cli("export", "-o", str(exported)) == 0
    assert cli("import", "--data-dir", str(tmp_path / "other"), str(exported)) == 0
    assert capsys.readouterr().err == ""


def test_import_shows_a_progress_bar_on_a_terminal(
    end_to_end: None, filled: Path, tmp_path: Path
) -> None:
    """The real CLI with its stderr on a pseudo-terminal: the bar is redrawn in place."""
    exported = tmp_path / "all.jsonl"
    assert cli("export", "-o", str(exported)) == 0
    line = exported.read_text(encoding="utf-8").splitlines()[0]
    record = json.loads(line)
    with exported.open("w", encoding="utf-8") as file:
        for i in range(3000):  # enough to read for a while
            record["conversation"]["title"] = f"chat {i}"
            file.write(json.dumps(record) + "\n")
    leader, follower = os.openpty()
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "app", "import", "--data-dir", str(tmp_path / "other")]
            + [str(exported)],
            stdout=subprocess.PIPE,
            stderr=follower,
        )
        os.close(follower)
        drawn = b""
        while chunk := _read_some(leader):  # read as it comes: a full terminal blocks
            drawn += chunk
        out, _ = child.communicate(timeout=scaled(120))
    finally:
        os.close(leader)
    assert child.returncode == 0
    assert out.decode() == f"Imported 3000 conversations from {exported}\n"
    text = drawn.decode()
    assert text.startswith("\r[---") and text.endswith("\r\n")  # from the start, in place
    assert text.count("\r[") >= 2
    size = f"{exported.stat().st_size / 1e6:.1f} MB"
    assert f"[{'#' * 30}] {size} of {size}" in text


def _read_some(fd: int) -> bytes:
    """What the terminal holds; b'' once its other side is closed and it is empty."""
    try:
        return os.read(fd, 65536)
    except OSError:  # EIO: the writer is gone
        return b""
