"""ling-chat's exit statuses: what ended a command, for scripts and shells (docs/failures.md)."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    """The status `ling-chat` exits with."""

    OK = 0
    ERROR = 1
    """An error; its one line says which."""
    PROOF_REFUSED = 2
    """A lever is not engaged, or a setting contradicts one: the proof refused the start."""
    PREFLIGHT_REFUSED = 3
    """The machine cannot start the engine (no usable GPU included)."""
    REPLY_UNSAVED = 4
    """A reply could not be saved to the history (the exit message says where its text is)."""


def signal_status(signum: int) -> int:
    """The status of a command a signal ended: 128 + its number, as shells report it
    (SIGHUP 129, SIGINT 130, SIGTERM 143)."""
    return 128 + signum
