"""The `ling-chat` command line: parse arguments, then hand over to one command module.

Each command lives in `app/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> int`; modules import their heavy dependencies (textual, sglang) inside
`run`, so `ling-chat --help` stays instant.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from app import __version__
from app.commands import (
    bench,
    chat,
    doctor,
    download,
    export,
    history,
    importing,
    prepare,
    serve,
)
from app.crash import crash_line
from app.errors import LingChatError, PreflightFailed
from app.textsafe import made_visible

COMMANDS: dict[str, ModuleType] = {
    "doctor": doctor,
    "history": history,
    "export": export,
    "import": importing,
    "bench": bench,
    "serve": serve,
    "prepare": prepare,
    "download": download,
}


def build_parser() -> argparse.ArgumentParser:
    """The full parser; with no command, `ling-chat` opens the chat UI."""
    parser = argparse.ArgumentParser(
        prog="ling-chat",
        description="Chat with Ling-3.0-flash in the terminal, every decode optimization proven.",
        epilog=" ".join((chat.__doc__ or "").split()),
    )
    parser.add_argument("--version", action="version", version=f"ling-chat {__version__}")
    chat.add_arguments(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in COMMANDS.items():
        sub = commands.add_parser(name, help=module.__doc__, description=module.__doc__)
        module.add_arguments(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ling-chat; returns the process exit status."""
    args = build_parser().parse_args(argv)
    module = COMMANDS.get(args.command, chat)
    try:
        if module is chat or getattr(args, "raw", False):  # the UI makes its own text safe
            status = int(module.run(args))
        else:
            with contextlib.redirect_stdout(made_visible(sys.stdout)):
                status = int(module.run(args))
        sys.stdout.flush()  # a full disk or closed pipe shows here, not at interpreter exit
        return status
    except LingChatError as exc:
        print(f"ling-chat: error: {exc}", file=made_visible(sys.stderr))
        return PREFLIGHT_STATUS if isinstance(exc, PreflightFailed) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `| head` closed the pipe: the reader has what it wanted
        _drop_stdout()
        return 0
    except OSError as exc:
        if exc.filename is not None or exc.errno not in _OUTPUT_ERRNOS:
            return _crashed(exc, args)
        _drop_stdout()
        print(f"ling-chat: error: cannot write to standard output: {exc.strerror}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a bug: one line, its traceback to the log
        return _crashed(exc, args)


def _crashed(error: Exception, args: argparse.Namespace) -> int:
    """Report an unexpected error in one line naming the log that holds its traceback."""
    from app.settings import load_settings

    try:
        log_dir = load_settings(data_dir=getattr(args, "data_dir", None)).log_dir
    except LingChatError:
        log_dir = None
    print(crash_line(error, log_dir), file=made_visible(sys.stderr))
    return 1


PREFLIGHT_STATUS = 3
"""The exit status of a start the preflight refused (2: a proof refused it)."""
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""Errors writing standard output (a failed file write raises an error naming the file)."""


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the unwritten rest is not retried at exit (Python's docs)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
