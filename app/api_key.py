"""Where the API key comes from: `--api-key-file`, `LING_CHAT_API_KEY` or `--api-key`."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from pathlib import Path

from app.core.errors import ConfigError

API_KEY_ENV = "LING_CHAT_API_KEY"
PS_WARNING = (
    "ling-chat: warning: --api-key shows in `ps` to every user of this machine; "
    f"use {API_KEY_ENV} or --api-key-file"
)


def add_api_key_arguments(parser: argparse.ArgumentParser, purpose: str) -> None:
    """--api-key and --api-key-file."""
    parser.add_argument(
        "--api-key", metavar="KEY", help=f"{purpose} (shows in `ps`: prefer the two below)"
    )
    parser.add_argument(
        "--api-key-file",
        metavar="PATH",
        help=f"read the API key from this file (mode 0600); or set {API_KEY_ENV}",
    )


def api_key(args: argparse.Namespace) -> str | None:
    """The key from the flag (with a warning), the key file or the environment; else None.

    Raises:
        ConfigError: both flags given, or a key file that is missing, empty or not private.
    """
    flag, file = getattr(args, "api_key", None), getattr(args, "api_key_file", None)
    if flag is not None and file is not None:
        raise ConfigError("give the API key once: --api-key or --api-key-file, not both")
    if flag is not None:
        print(PS_WARNING, file=sys.stderr)
        return flag or None
    if file is not None:
        return read_key_file(Path(file).expanduser())
    return os.environ.get(API_KEY_ENV) or None


def read_key_file(path: Path) -> str:
    """The key in `path`, without surrounding whitespace; the file must be private."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"--api-key-file {path}: not a regular file")
        if mode & 0o077:
            raise ConfigError(
                f"--api-key-file {path}: readable by others (mode {mode & 0o777:04o}); "
                f"chmod 600 {path}"
            )
        key = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"--api-key-file {path}: cannot read ({reason})") from exc
    if not key:
        raise ConfigError(f"--api-key-file {path}: the file is empty")
    return key
