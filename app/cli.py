"""The `ling-chat` command line: parse arguments, then hand over to one command module.

Each command lives in `app/commands/<name>.py` with `add_arguments(parser)` and
`run(args) -> int`; modules import their heavy dependencies (textual, sglang) inside
`run`, so `ling-chat --help` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

from app import __version__
from app.commands import bench, chat, doctor, export, history, importing, serve
from app.errors import LingChatError

COMMANDS: dict[str, ModuleType] = {
    "doctor": doctor,
    "history": history,
    "export": export,
    "import": importing,
    "bench": bench,
    "serve": serve,
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
        return int(module.run(args))
    except LingChatError as exc:
        print(f"ling-chat: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
