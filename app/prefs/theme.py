"""The colour theme last chosen, remembered in `theme.json` beside the config file:
`{"theme": "nord"}`, written whole or not at all (`app.files`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from app.core.errors import ConfigError
from app.prefs.pref_file import read_pref, unreadable, write_pref

FILE_NAME: Final = "theme.json"


class ThemeFile:
    """`theme.json` in a folder (the config file's)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME

    def load(self) -> str | None:
        """The remembered theme's name; None when none was saved.

        Raises:
            ConfigError: the file does not read (one line naming it; it is left as it is).
        """
        text = read_pref(self.path, "theme")
        if text is None:
            return None
        try:
            found = json.loads(text)
        except ValueError as exc:
            raise unreadable(self.path, "theme", exc) from exc
        name = found.get("theme") if isinstance(found, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f'{self.path}: cannot read the theme (expected {{"theme": NAME}})')
        return name

    def save(self, name: str) -> None:
        """Remember `name`.

        Raises:
            ConfigError, ExportError: the folder or the file cannot be written.
        """
        write_pref(self.path, json.dumps({"theme": name}) + "\n")
