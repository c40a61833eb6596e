"""Starting `ling-chat serve` detached: its own session, no terminal, output to its log."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

SERVE_COMMAND = [sys.executable, "-m", "app"]
"""What runs `ling-chat ...` in a fresh process; the GPU bench and the CPU tests put their
own entry here (a known-answer scheduler, or the engine double)."""


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_detached(argv: list[str], log_file: Path) -> int:
    """Run `ling-chat ARGV` in a new session, stdin from /dev/null, stdout and stderr to
    `log_file` (0600); returns its pid. It outlives this process and its terminal."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            [*SERVE_COMMAND, *argv],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(fd)
    return child.pid
