"""Export conversations (all, or --id ones) as Markdown, JSON, JSONL, a standalone HTML page, or
CSV (one row per measured reply, with its engine run)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from pathlib import Path

from app.commands.common import (
    add_data_arguments,
    add_force_argument,
    add_raw_argument,
    force_hint,
    settings_from,
)
from app.core.errors import ConfigError
from app.files import write_atomic
from app.render.formats import FORMATS
from app.storage import ChatStore
from app.storage.transfer.export import collect


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--id`, `--format`, `-o/--output`, `--force` and `--data-dir`."""
    parser.add_argument(
        "--id",
        dest="ids",
        type=int,
        action="append",
        metavar="ID",
        help="conversation to export (repeatable; default: all, archived included)",
    )
    parser.add_argument(
        "--format",
        choices=list(FORMATS),
        help="output format (default: from the --output suffix, else md)",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="PATH",
        help="file to write, `-` for stdout (default: ling-chat-export-DATE.FORMAT here)",
    )
    add_force_argument(parser, "the output file")
    add_data_arguments(parser)
    add_raw_argument(parser)


def run(args: argparse.Namespace) -> int:
    """Write the export and say where it went."""
    fmt = args.format or _format_from(args.output)
    with ChatStore.open_to_read(settings_from(args).db_path) as store:
        export = collect(store, args.ids)
    chunks = FORMATS[fmt](export)
    if args.output == "-":
        sys.stdout.writelines(chunks)  # a closed pipe or a full disk: see `cli.main`
        return 0
    path = Path(args.output or f"ling-chat-export-{datetime.now():%Y%m%d-%H%M%S}.{fmt}")
    with force_hint():
        write_atomic(path, chunks, replace=args.force)
    count = len(export.threads)
    print(f"Exported {count} conversation{'s' * (count != 1)} to {path}")
    return 0


def _format_from(output: str | None) -> str:
    """The format the output file's extension names; Markdown for none (or stdout).

    Raises:
        ConfigError: an extension that names no format (`x.pdf`).
    """
    suffix = Path(output).suffix.lstrip(".").lower() if output and output != "-" else ""
    if suffix and suffix not in FORMATS:
        known = ", ".join(f".{name}" for name in FORMATS)
        raise ConfigError(
            f"-o {output}: ling-chat cannot write .{suffix} files; it writes {known} "
            "(or --format FORMAT for any name)"
        )
    return suffix or "md"
