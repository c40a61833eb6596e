"""Send a process's standard output and error to a log file for a while."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


@contextlib.contextmanager
def output_to_log(log_file: Path) -> Iterator[TextIO]:
    """Point fds 1 and 2 at `log_file` (SGLang's logging, warnings, uvicorn, tqdm).

    Yields the terminal's standard output, for what the user must see; both fds are
    restored on exit, so an error raised inside still reaches the terminal.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    log = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    terminal = open(os.dup(saved[0]), "w", buffering=1, encoding="utf-8")  # noqa: SIM115
    try:
        os.dup2(log, 1)
        os.dup2(log, 2)
        yield terminal
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        terminal.close()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (log, *saved):
            os.close(fd)
