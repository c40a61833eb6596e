"""Reading a file to attach from real files: text in, binary, not UTF-8, too large and
over the room left refused in one line naming the file; the delimiters around its text."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.attachment import (
    Attachment,
    AttachmentRefused,
    read_attachment,
    typed_part,
    with_attachments,
)


def test_a_text_file_is_read_with_its_name_size_and_estimated_tokens(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("café " * 200, encoding="utf-8")
    attachment = read_attachment(path, room=10_000)
    assert (attachment.name, attachment.size) == ("notes.md", 1200)
    assert attachment.text == "café " * 200
    assert 250 < attachment.tokens < 270  # 1,000 characters and the delimiters, 4 a token
    assert attachment.label() == f"notes.md · 1.2 kB · ≈{attachment.tokens:,} tokens (estimate)"


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"PK\x03\x04\x00\x00", "it is a binary file (it holds NUL bytes)"),
        (b"caf\xe9 latin-1", "it is not UTF-8 text (byte 3 does not decode)"),
    ],
)
def test_binary_and_non_utf8_files_are_refused_in_one_line(
    tmp_path: Path, data: bytes, why: str
) -> None:
    path = tmp_path / "file.bin"
    path.write_bytes(data)
    with pytest.raises(AttachmentRefused) as refused:
        read_attachment(path, room=None)
    assert str(refused.value) == f"cannot attach {path}: {why}"


def test_a_file_over_the_room_left_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    path.write_text("x" * 4000, encoding="utf-8")
    with pytest.raises(AttachmentRefused, match=r"about 1,0\d\d tokens \(estimate\), over the 500"):
        read_attachment(path, room=500)
    assert read_attachment(path, room=2000).size == 4000


def test_folders_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AttachmentRefused, match="not a regular file"):
        read_attachment(tmp_path, room=None)
    with pytest.raises(AttachmentRefused, match="no such file"):
        read_attachment(tmp_path / "gone.txt", room=None)


def test_the_message_wraps_each_file_between_lines_naming_it() -> None:
    files = [Attachment("a.py", 6, "x = 1\n"), Attachment("b.txt", 2, "hi")]
    message = with_attachments("review these", files)
    assert message == (
        "review these\n\n--- file: a.py ---\nx = 1\n--- end of file: a.py ---\n\n"
        "--- file: b.txt ---\nhi\n--- end of file: b.txt ---"
    )
    assert typed_part(message, ["a.py", "b.txt"]) == "review these"
    assert typed_part(with_attachments("", files), ["a.py", "b.txt"]) == ""
    assert typed_part("no files", []) == "no files"
