"""The `ling-chat` command line: parse arguments, then hand over to one command module.

Each command lives in `app/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> int`. A command's module is imported only when that command runs or shows
its help (`ling-chat --help` reads the summaries from the modules' source), and the chat's
module imports its heavy dependencies (pydantic, textual, sglang) inside `run`, so
`ling-chat --help` stays instant.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import errno
import functools
import importlib
import importlib.util
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app import __version__
from app.commands import chat
from app.core.errors import LeverOverridden, LingChatError, PreflightFailed
from app.core.exit_status import ExitStatus, signal_status
from app.plumbing.crash import crash_line
from app.textsafe import made_visible

COMMANDS: dict[str, str] = {
    "doctor": "app.commands.doctor",
    "history": "app.commands.history",
    "export": "app.commands.export",
    "import": "app.commands.importing",
    "bench": "app.commands.bench",
    "serve": "app.commands.serve",
    "engine": "app.commands.engine",
    "prepare": "app.commands.prepare",
    "download": "app.commands.download",
}
"""Command name -> its module."""


class _CommandParser(argparse.ArgumentParser):
    """A command's parser: its module adds the arguments when the command is parsed."""

    def __init__(self, *args: Any, module: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._module = module

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._module:
            module, self._module = self._module, ""
            importlib.import_module(module).add_arguments(self)
        return super().parse_known_args(args, namespace)


def build_parser() -> argparse.ArgumentParser:
    """The full parser; with no command, `ling-chat` opens the chat UI."""
    parser = argparse.ArgumentParser(
        prog="ling-chat",
        description="Chat with Ling-3.0-flash in the terminal, every decode optimization proven.",
        epilog=" ".join((chat.__doc__ or "").split()),
    )
    parser.add_argument("--version", action="version", version=f"ling-chat {__version__}")
    chat.add_arguments(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_CommandParser)
    for name, module in COMMANDS.items():
        summary = _docstring(module)
        commands.add_parser(name, help=summary, description=summary, module=module)
    return parser


@functools.cache
def _docstring(module: str) -> str | None:
    """A module's docstring, read from its source without importing it (once a process)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    return ast.get_docstring(ast.parse(Path(spec.origin).read_text(encoding="utf-8")))


def main(argv: Sequence[str] | None = None) -> int:
    """Run ling-chat; returns the process exit status."""
    args = build_parser().parse_args(argv)
    module = importlib.import_module(COMMANDS[args.command]) if args.command else chat
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
        if isinstance(exc, LeverOverridden):
            return ExitStatus.PROOF_REFUSED
        if isinstance(exc, PreflightFailed):
            return ExitStatus.PREFLIGHT_REFUSED
        return ExitStatus.ERROR
    except KeyboardInterrupt:
        return signal_status(signal.SIGINT)
    except BrokenPipeError:  # `| head` closed the pipe: the reader has what it wanted
        _drop_stdout()
        return ExitStatus.OK
    except OSError as exc:
        if exc.filename is not None or exc.errno not in _OUTPUT_ERRNOS:
            return _crashed(exc, args)
        _drop_stdout()
        print(f"ling-chat: error: cannot write to standard output: {exc.strerror}", file=sys.stderr)
        return ExitStatus.ERROR
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
    return ExitStatus.ERROR


_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})
"""Errors writing standard output (a failed file write raises an error naming the file)."""


def _drop_stdout() -> None:
    """Point stdout at /dev/null, so the unwritten rest is not retried at exit (Python's docs)."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
