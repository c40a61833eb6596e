"""The colour theme last chosen, remembered in `theme.json` beside the config file:
`{"theme": "nord"}`, written whole or not at all (`app.files`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from app.core.errors import ConfigError
from app.files import private_dir, write_atomic

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
        try:
            found = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            raise ConfigError(f"{self.path}: cannot read the theme ({why})") from exc
        name = found.get("theme") if isinstance(found, dict) else None
        if not isinstance(name, str) or not name:
            raise ConfigError(f'{self.path}: cannot read the theme (expected {{"theme": NAME}})')
        return name

    def save(self, name: str) -> None:
        """Remember `name`.

        Raises:
            ConfigError, ExportError: the folder or the file cannot be written.
        """
        try:
            private_dir(self.path.parent)
        except OSError as exc:
            raise ConfigError(f"cannot create {self.path.parent}: {exc.strerror}") from exc
        write_atomic(self.path, [json.dumps({"theme": name}) + "\n"], replace=True)
