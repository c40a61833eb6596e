"""Reading and writing a file the user keeps beside the config file: one line naming the file
when it cannot be read, written whole or not at all (`app.files`) in a private folder."""

from __future__ import annotations

from pathlib import Path

from app.core.errors import ConfigError
from app.files import private_dir, write_atomic


def read_pref(path: Path, what: str) -> str | None:
    """The text of `path`; None when there is no such file.

    Raises:
        ConfigError: it cannot be read: `PATH: cannot read the WHAT (why)`.
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, what, exc) from exc


def unreadable(path: Path, what: str, exc: Exception) -> ConfigError:
    """The one line for a file that does not read, with the cause's own words."""
    why = getattr(exc, "strerror", None) or str(exc)
    return ConfigError(f"{path}: cannot read the {what} ({why})")


def write_pref(path: Path, text: str) -> None:
    """Write `text` to `path` whole, its folder made private first.

    Raises:
        ConfigError: the folder cannot be created.
        ExportError: the file cannot be written (or is a link).
    """
    try:
        private_dir(path.parent)
    except OSError as exc:
        raise ConfigError(f"cannot create {path.parent}: {exc.strerror}") from exc
    write_atomic(path, [text], replace=True)
