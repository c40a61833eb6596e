"""Download the model's checkpoint into the Hugging Face cache (resumable; offline: check it)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO

from app.backend.engine.config import draft_models
from app.backend.engine.download import Progress, fetch_checkpoint, is_hub_id
from app.commands.common import add_data_arguments, engine_config, settings_from

BAR_WIDTH = 30
LOG_EVERY_S = 10.0
"""Without a terminal, a progress line this often."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        help="HF id or local folder (default: the configured model_path, and with the dspark "
        "profile its dspark_draft)",
    )
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Fetch what the cache lacks; print each checkpoint's folder."""
    if args.model:
        models = [args.model]
    else:
        settings = settings_from(args)
        models = [settings.model_path, *draft_models([engine_config(settings)])]
    for model in models:
        print(fetch_model(model), flush=True)
    return 0


def fetch_model(model_path: str, stream: TextIO | None = None) -> str:
    """The local folder of `model_path`, downloaded first with a text progress bar if need be."""
    if not is_hub_id(model_path):
        return str(fetch_checkpoint(model_path))
    bar = TextBar(stream or sys.stderr)
    try:
        return str(fetch_checkpoint(model_path, bar))
    finally:
        bar.close()


class TextBar:
    """`[#########-----] 12.3 GB of 70.1 GB · 85.2 MB/s · 11:20 left`, redrawn in place on a
    terminal, a line every LOG_EVERY_S into a file."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._live = stream.isatty()
        self._drawn = False
        self._logged_at = -LOG_EVERY_S

    def __call__(self, progress: Progress) -> None:
        text = render(progress)
        now = time.monotonic()
        if self._live:
            self._stream.write(f"\r{text}")
        elif now - self._logged_at >= LOG_EVERY_S or progress.done >= progress.total:
            self._logged_at = now
            self._stream.write(f"{text}\n")
        else:
            return
        self._drawn = True
        self._stream.flush()

    def close(self) -> None:
        if self._live and self._drawn:
            self._stream.write("\n")
            self._stream.flush()


def render(progress: Progress) -> str:
    """The bar and the numbers."""
    share = progress.done / progress.total if progress.total else 1.0
    filled = round(share * BAR_WIDTH)
    return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {progress.line()}"
