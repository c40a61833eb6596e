"""Stored and model text never drives the terminal: the pure rule, and the CLI on a real tty."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.settings import load_settings
from app.storage import ChatStore, MessageStatus
from app.telemetry import ReplyStats
from app.textsafe import TerminalText, is_safe, visible
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = "\x1b]0;PWNED\x07 \x1b]52;c;cHduZWQ=\x07 \x1b[2J\x9b31m\x90q\x9c\x7f\r"
"""OSC 0 (title), OSC 52 (clipboard), CSI clear, a C1 CSI and DCS/ST, DEL and CR."""


BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
"""Every BiDi control: embeddings, overrides, isolates, marks."""


def _controls(char: str) -> bool:
    """A control character, or an invisible format one (but ZWJ and ZWNJ, which text needs)."""
    code = ord(char)
    if (code < 0x20 and char not in "\n\t") or 0x7F <= code <= 0x9F:
        return True
    return unicodedata.category(char) in ("Cf", "Zl", "Zp") and char not in "\u200c\u200d"


@given(st.text())
def test_visible_text_holds_no_control_character(text: str) -> None:
    shown = visible(text)
    assert is_safe(shown)
    assert not any(_controls(char) for char in shown)


@given(st.text(alphabet=st.characters(codec="utf-8").filter(lambda c: not _controls(c))))
def test_text_without_controls_is_unchanged(text: str) -> None:
    assert visible(text) == text
    assert is_safe(text)


@given(st.text(), st.text())
def test_chunks_made_visible_one_by_one_equal_the_whole(first: str, second: str) -> None:
    assert visible(first) + visible(second) == visible(first + second)


@given(st.text())
def test_every_line_break_and_tab_survives(text: str) -> None:
    shown = visible(text)
    assert shown.count("\n") == text.count("\n")
    assert shown.count("\t") == text.count("\t")


def test_each_control_has_a_documented_stand_in() -> None:
    assert visible(HOSTILE) == "␛]0;PWNED␇ ␛]52;c;cHduZWQ=␇ ␛[2J␛[31m␛Pq␛\\␡␍"


def test_every_bidi_control_and_invisible_format_character_is_shown_as_its_code_point() -> None:
    assert visible(f"a{BIDI}b") == "a" + "".join(f"⟨U+{ord(c):04X}⟩" for c in BIDI) + "b"
    assert visible("x\u200by\ufeffz\u2028\U000e0041\u3164") == (
        "x⟨U+200B⟩y⟨U+FEFF⟩z⟨U+2028⟩⟨U+E0041⟩⟨U+3164⟩"
    )
    assert visible("👨\u200d👩 می\u200cخواهم") == "👨\u200d👩 می\u200cخواهم"  # joiners stay


def test_every_format_character_of_unicode_is_neutralised() -> None:
    found = [chr(code) for code in range(sys.maxunicode + 1) if _controls(chr(code))]
    assert len(found) > 150
    assert [char for char in found if is_safe(char)] == []


def test_a_stream_writes_through_visible() -> None:
    stream = io.StringIO()
    TerminalText(stream).writelines(["a\x1b[2J", "b\u202e\n"])
    assert stream.getvalue() == "a␛[2Jb⟨U+202E⟩\n"


@pytest.fixture
def hostile_db() -> Path:
    db_path = load_settings().db_path  # LING_CHAT_DATA_DIR from the isolated_dirs fixture
    with ChatStore.open(db_path) as store:
        chat = store.create_conversation(f"title {HOSTILE}{BIDI}")
        store.add_user_message(chat.id, f"ask {HOSTILE} <script>alert(1)</script>")
        writer = store.start_reply(chat.id)
        writer.append(answer=f"answer {HOSTILE}", reasoning=f"thought {HOSTILE}")
        stats = ReplyStats(9, 5, 0.1, 0.5, 0.1, 10.0)
        writer.finish(MessageStatus.ERROR, stats, error=f"failed {HOSTILE}")
    return db_path


def _on_a_tty(*argv: str, status: int = 0) -> str:
    """What `ling-chat ARGV` writes to a pseudo-terminal (stdout and stderr)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", *argv],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
    )
    os.close(follower)
    output = bytearray()
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(leader)
    text = output.decode()
    assert proc.wait(timeout=scaled(60)) == status, text
    return text


@pytest.mark.parametrize(
    "argv",
    [
        ("history",),
        ("history", "--search", "answer"),
        ("history", "show", "1"),
        ("history", "archive", "1"),
        ("export", "-o", "-"),
        ("export", "--format", "json", "-o", "-"),
    ],
    ids=" ".join,
)
def test_stored_text_reaches_a_terminal_without_a_control_character(
    end_to_end: None, hostile_db: Path, argv: tuple[str, ...]
) -> None:
    shown = _on_a_tty(*argv)
    assert "PWNED" in shown or "title" in shown
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "␛]0;PWNED␇" in shown or "\\u001b]0;PWNED\\u0007" in shown


def _piped(*argv: str) -> str:
    """What `ling-chat ARGV` writes into a pipe, as `| head` or `| less -R` read it."""
    done = subprocess.run(
        [sys.executable, "-m", "app", *argv], cwd=ROOT, capture_output=True, timeout=scaled(60)
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


@pytest.mark.parametrize(
    "argv",
    [
        ("history",),
        ("history", "--search", "answer"),
        ("history", "show", "1"),
        ("export", "-o", "-"),
        ("export", "--format", "csv", "-o", "-"),
        ("export", "--format", "html", "-o", "-"),
        ("export", "--format", "json", "-o", "-"),
        ("export", "--format", "jsonl", "-o", "-"),
    ],
    ids=" ".join,
)
def test_stored_text_piped_to_a_pager_holds_no_control_character(
    end_to_end: None, hostile_db: Path, argv: tuple[str, ...]
) -> None:
    shown = _piped(*argv)
    assert "PWNED" in shown
    assert [char for char in shown.replace("\r\n", "\n") if _controls(char)] == []
    if "csv" in argv:  # RFC 4180's line ends stay
        assert shown.count("\r\n") == 2 and "\r" not in shown.replace("\r\n", "")


@pytest.mark.parametrize(
    "argv",
    [("history", "--raw"), ("history", "show", "1", "--raw"), ("export", "--raw", "-o", "-")],
)
def test_raw_prints_the_exact_text(
    end_to_end: None, hostile_db: Path, argv: tuple[str, ...]
) -> None:
    assert f"title {HOSTILE}{BIDI}" in _piped(*argv)


def test_a_title_with_line_breaks_cannot_draw_rows_of_its_own(end_to_end: None) -> None:
    with ChatStore.open(load_settings().db_path) as store:
        store.create_conversation("real\n 99  2026-01-01 00:00     1  fake row\tend")
    listed = _piped("history").splitlines()
    assert len(listed) == 2
    assert listed[1].endswith("real␤ 99  2026-01-01 00:00     1  fake row␉end")
    assert _piped("history", "--raw").count("\n") == 3


def test_an_error_naming_stored_text_reaches_a_terminal_made_visible(
    end_to_end: None, tmp_path: Path
) -> None:
    bad = tmp_path / f"bad{HOSTILE[:6]}.json"
    bad.write_text("{}")
    shown = _on_a_tty("import", str(bad), status=1)
    assert "ling-chat: error:" in shown
    assert "\x1b" not in shown and "␛]0;PW" in shown


def test_a_file_export_keeps_the_exact_text(
    end_to_end: None, hostile_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.md"
    subprocess.run(
        [sys.executable, "-m", "app", "export", "-o", str(out)],
        cwd=ROOT,
        check=True,
        timeout=scaled(60),
    )
    text = out.read_bytes().decode()
    assert f"answer {HOSTILE}" in text and f"ask {HOSTILE}" in text


def test_the_html_export_escapes_the_text(
    end_to_end: None, hostile_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.html"
    subprocess.run(
        [sys.executable, "-m", "app", "export", "-o", str(out)],
        cwd=ROOT,
        check=True,
        timeout=scaled(60),
    )
    text = out.read_bytes().decode()
    assert f"answer {HOSTILE}" in text  # exact: nothing in it to escape
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "<script" not in text
