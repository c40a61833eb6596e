"""Writes to a terminal that hung up or takes nothing more never hold the writer up for good."""

from __future__ import annotations

import io
import os
import pty
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from app.ui.terminal import POLL_S, TerminalOutput


@contextmanager
def terminal() -> Iterator[tuple[int, io.TextIOWrapper]]:
    """A pseudo-terminal: its leader's fd, and its follower as a text file (as stderr is)."""
    leader, follower = pty.openpty()
    file = io.TextIOWrapper(io.FileIO(follower, "w"), encoding="utf-8", errors="backslashreplace")
    try:
        yield leader, file
    finally:
        file.close()
        with suppress(OSError):
            os.close(leader)


def test_a_terminal_that_takes_nothing_more_is_given_up_and_the_write_returns() -> None:
    hung_up: list[bool] = []
    with terminal() as (_, file):  # the leader is never read: the terminal fills up
        output = TerminalOutput(file, lambda: hung_up.append(True))
        written = threading.Event()

        def write_a_lot() -> None:
            output.write("x" * 1_000_000)
            written.set()

        threading.Thread(target=write_a_lot, daemon=True).start()
        assert not written.wait(0.2)  # waiting for room
        output.give_up()
        assert written.wait(POLL_S * 5)
        started = time.monotonic()
        assert output.write("more") == 4  # dropped at once
        assert time.monotonic() - started < POLL_S
        output.close()
    assert hung_up == []


def test_a_terminal_that_hung_up_is_said_once_and_written_no_more() -> None:
    hung_up: list[bool] = []
    with terminal() as (leader, file):
        output = TerminalOutput(file, lambda: hung_up.append(True))
        assert output.write("before") == 6
        assert os.read(leader, 100) == b"before"
        os.close(leader)  # the window closed
        output.write("after")
        output.write("and after")
        output.close()
    assert hung_up == [True]


def test_what_is_written_arrives_whole_and_encoded() -> None:
    with terminal() as (leader, file):
        output = TerminalOutput(file, lambda: None)
        output.write("speed · 612 tok/s\n")
        assert os.read(leader, 100) == "speed · 612 tok/s\r\n".encode()
        output.close()
