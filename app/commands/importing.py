"""Add the conversations of a JSON or JSONL export (`ling-chat export -o FILE.json`) to the
history: all or nothing, skipping conversations already there."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from app.backend.download import Progress
from app.commands.common import add_data_arguments, settings_from
from app.render.progress import TextBar
from app.storage import ChatStore
from app.storage.transfer.importing import import_export

REDRAW_EVERY_S = 0.1
"""The progress bar is redrawn at most this often."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The file, and `--data-dir`."""
    parser.add_argument("file", type=Path, metavar="FILE", help="a .json or .jsonl export")
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Import the file, with a progress bar on a terminal, and say what was added."""
    bar = FileBar(TextBar(sys.stderr)) if sys.stderr.isatty() else None
    with ChatStore.open(settings_from(args).db_path) as store:
        try:
            done = import_export(store, args.file, bar)
        finally:
            if bar is not None:
                bar.close()
    added = f"{done.conversations} conversation{'s' * (done.conversations != 1)}"
    notes = [f"{done.skipped} already there, skipped"] if done.skipped else []
    if done.extended:
        notes.insert(0, f"{done.extended} already there, given the messages it lacked")
    print(f"Imported {added} from {args.file}" + (f" ({'; '.join(notes)})" if notes else ""))
    return 0


class FileBar:
    """How much of the file was imported, its rate and the time left: drawn at most every
    `REDRAW_EVERY_S`, and as it last was when closed."""

    def __init__(self, bar: TextBar) -> None:
        self._bar = bar
        self._began = time.monotonic()
        self._drawn_at = -REDRAW_EVERY_S
        self._last: Progress | None = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        self._last = Progress(done, total, done / max(now - self._began, 1e-3))
        if now - self._drawn_at >= REDRAW_EVERY_S:
            self._drawn_at = now
            self._bar(self._last)

    def close(self) -> None:
        if self._last is not None:
            self._bar(self._last)
        self._bar.close()
