"""Add the conversations of a JSON or JSONL export (`ling-chat export -o FILE.json`) to the
history: all or nothing, skipping conversations already there."""

from __future__ import annotations

import argparse
from pathlib import Path

from app.commands.common import add_data_arguments, settings_from
from app.storage import ChatStore
from app.storage.importing import import_export


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The file, and `--data-dir`."""
    parser.add_argument("file", type=Path, metavar="FILE", help="a .json or .jsonl export")
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Import the file and say what was added."""
    with ChatStore.open(settings_from(args).db_path) as store:
        done = import_export(store, args.file)
    added = f"{done.conversations} conversation{'s' * (done.conversations != 1)}"
    skipped = f" ({done.skipped} already there, skipped)" if done.skipped else ""
    print(f"Imported {added} from {args.file}{skipped}")
    return 0
