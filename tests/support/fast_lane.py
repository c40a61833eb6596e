"""The fast lane (`-m "not slow"`) starts no Python process and runs no app under Pilot:
what would do so in a test without the `end_to_end` fixture fails it, naming the fixture."""

from __future__ import annotations

import multiprocessing.process
import os
import pty
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App

ASK = "end-to-end tests ask for the `end_to_end` fixture (tests/conftest.py): the slow lane"


def guard(nodeid: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make starting a Python process, a pseudo-terminal's child, a multiprocessing child or
    an app under Pilot fail this test."""

    def refuse(what: str) -> None:
        pytest.fail(f"{nodeid} {what} in the fast lane: {ASK}", pytrace=False)

    popen_init = subprocess.Popen.__init__

    def popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
        program = args[0] if isinstance(args, list | tuple) else str(args).split()[0]
        if Path(os.fspath(program)).name.startswith("python") or program == sys.executable:
            refuse(f"starts a Python process ({program})")
        popen_init(self, args, *rest, **options)

    def refusing(what: str) -> Callable[..., Any]:
        return lambda *args, **kwargs: refuse(what)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    monkeypatch.setattr(pty, "fork", refusing("starts a process on a pseudo-terminal"))
    monkeypatch.setattr(
        multiprocessing.process.BaseProcess, "start", refusing("starts a multiprocessing child")
    )
    monkeypatch.setattr(App, "run_test", refusing("runs the app under Pilot"))
