"""A download's progress as a text bar: redrawn in place on a terminal, a line now and then
into a file."""

from __future__ import annotations

import time
from typing import TextIO

from app.backend.download import Progress

BAR_WIDTH = 30
LOG_EVERY_S = 10.0
"""Without a terminal, a progress line this often."""


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
