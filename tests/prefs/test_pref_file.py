"""A file kept beside the config file, on real files: read, written whole, and one line
naming it when it does not read or its folder cannot be made."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.errors import ConfigError
from app.prefs.pref_file import read_pref, write_pref


def test_a_written_file_reads_back_and_a_missing_one_is_none(tmp_path: Path) -> None:
    path = tmp_path / "made" / "x.json"
    assert read_pref(path, "x") is None
    write_pref(path, "{}\n")
    assert read_pref(path, "x") == "{}\n"
    assert path.parent.stat().st_mode & 0o077 == 0  # the folder is private


def test_a_file_that_does_not_read_is_one_line_naming_it(tmp_path: Path) -> None:
    folder = tmp_path / "x.json"
    folder.mkdir()  # a folder where the file should be
    with pytest.raises(ConfigError, match=f"^{folder}: cannot read the x \\(.+\\)$"):
        read_pref(folder, "x")
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=f"^{bad}: cannot read the x \\("):
        read_pref(bad, "x")


def test_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^cannot create {blocker}: "):
        write_pref(blocker / "x.json", "{}\n")
    assert blocker.read_text(encoding="utf-8") == "a file, not a folder"
