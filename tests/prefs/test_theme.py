"""The remembered theme in a real `theme.json`: saved and read back, a bad file one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.core.errors import ConfigError
from app.prefs.theme import ThemeFile


def test_the_theme_is_read_back_after_a_restart(tmp_path: Path) -> None:
    ThemeFile(tmp_path / "config").save("nord")
    assert ThemeFile(tmp_path / "config").load() == "nord"
    assert ThemeFile(tmp_path / "empty").load() is None


@pytest.mark.parametrize("text", ["nord", '{"theme": 3}', "[]"])
def test_a_bad_theme_file_is_one_line_naming_it(tmp_path: Path, text: str) -> None:
    path = tmp_path / "theme.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{path}: cannot read the theme"):
        ThemeFile(tmp_path).load()
    assert path.read_text(encoding="utf-8") == text
