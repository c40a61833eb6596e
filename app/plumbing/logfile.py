"""ling-chat's own log: what the `app` loggers report, tracebacks of bugs included, in a
file private to the user."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from app.core.errors import ConfigError
from app.files import private_dir, private_file

LOG_NAME: Final = "ling-chat.log"
LOGGER: Final = "app"


class _AppLogHandler(logging.FileHandler):
    """The handler `logging_to` installs, told apart from any other by its type."""


@contextmanager
def logging_to(log_dir: Path) -> Iterator[Path]:
    """Append the `app` loggers' records to `log_dir`/ling-chat.log while the block runs.

    Raises:
        ConfigError: the log cannot be written (the data folder is the setting to change).
    """
    path = log_dir / LOG_NAME
    try:
        private_dir(log_dir)
        private_file(path)
        handler = _AppLogHandler(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot write ling-chat's log in {log_dir}: {exc.strerror}") from exc
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    logger = logging.getLogger(LOGGER)
    logger.addHandler(handler)
    try:
        yield path
    finally:
        logger.removeHandler(handler)
        handler.close()


def log_file() -> Path | None:
    """The file `logging_to` is writing now, if any."""
    for handler in logging.getLogger(LOGGER).handlers:
        if isinstance(handler, _AppLogHandler):
            return Path(handler.baseFilename)
    return None
