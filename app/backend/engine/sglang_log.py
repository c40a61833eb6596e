"""SGLang's log file: where every SGLang process writes, and what killed one of them."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from app.backend.engine.config import EngineConfig
from app.core.errors import BackendError
from app.files import private_dir, private_file

TAIL_CHARS = 20000
"""How much of the log's end is searched for the cause of a crash."""
ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


def logging_config(log_file: Path) -> dict[str, Any]:
    """A dictConfig that sends every SGLang process's logging to `log_file`, secrets masked."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(process)d %(name)s: %(message)s"}},
        "filters": {"redact": {"()": "app.plumbing.redact.RedactSecrets"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_file),
                "formatter": "plain",
                "filters": ["redact"],
            }
        },
        "root": {"level": "INFO", "handlers": ["file"]},
    }


def log_path(config: EngineConfig) -> Path:
    """Where SGLang and its child processes write."""
    return (config.log_dir or Path.cwd()) / "sglang.log"


def route_sglang_logging(log_file: Path) -> None:
    """Make every SGLang process of this one (`serve`, `doctor`) log to `log_file`.

    Raises:
        BackendError: the log's folder cannot be written (one line).
    """
    os.environ.update(SGLangLog(log_file).prepare())


def last_error(log: str) -> str | None:
    """The last exception line of a log (`RuntimeError: CUDA out of memory...`), if any.

    SGLang's own error only says "Initialization failed. Please see the error messages
    above."; the scheduler's traceback in the log says what went wrong.
    """
    for line in reversed(log.splitlines()):
        if match := ERROR_LINE.match(line.strip()):
            return f"{match.group(1)}: {match.group(2)}"[:300]
    return None


class SGLangLog:
    """The log file, kept across runs; `start` is where this boot's part begins."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.start = 0

    def prepare(self) -> dict[str, str]:
        """Create the private log and its logging config; the environment that points at it.

        Raises:
            BackendError: the log's folder cannot be written (one line).
        """
        config_path = self.path.with_suffix(".logging.json")
        try:
            private_dir(self.path.parent)
            private_file(self.path)
            private_file(config_path)
            config_path.write_text(json.dumps(logging_config(self.path)))
        except OSError as exc:
            raise BackendError(f"cannot write SGLang's log in {self.path.parent}: {exc}") from exc
        return {"SGLANG_LOGGING_CONFIG_PATH": str(config_path)}

    @contextlib.contextmanager
    def following(self) -> Iterator[TextIO]:
        """The log opened at its end, which becomes this boot's start; read it as it grows."""
        with open(self.path, encoding="utf-8", errors="replace") as log:
            self.start = log.seek(0, os.SEEK_END)
            yield log

    def crash_message(self) -> str:
        """What killed the scheduler, from the last exception in this boot's part."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as log:
                log.seek(max(self.start, log.seek(0, os.SEEK_END) - TAIL_CHARS))
                cause = last_error(log.read())
        except OSError:
            cause = None
        died = f"SGLang's scheduler died ({cause})" if cause else "SGLang's scheduler died"
        return f"{died}: restart ling-chat (see {self.path})"
