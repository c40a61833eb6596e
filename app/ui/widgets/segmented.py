"""`SegmentedMarkdown`: streamed Markdown split into segments so each append stays cheap.

Textual lays out and draws a Markdown widget as a whole whenever its blocks change, so
one growing widget costs more with every append (a 20 KB reply took a full core at
500 tokens/s). Text goes to the newest segment through `Markdown.get_stream`; once that
segment is long, a new one starts at the next blank line outside a code fence, and the
finished segments are never touched again.
"""

from __future__ import annotations

import re
from typing import Final

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

SEGMENT_CHARS: Final = 1500
"""A segment this long is closed at the next safe blank line."""
_FENCE = re.compile(r"^ {0,3}(```|~~~)", re.MULTILINE)


def safe_break(text: str, start: int) -> int | None:
    """An index just after a blank line in `text[start:]` that is outside code fences."""
    fences_before = len(_FENCE.findall(text, 0, start))
    position = start
    while (found := text.find("\n\n", position)) != -1:
        end = found + 2
        if (fences_before + len(_FENCE.findall(text, start, end))) % 2 == 0:
            return end
        position = end
    return None


class SegmentedMarkdown(Vertical):
    """Markdown that grows by `write`; reads as one document."""

    DEFAULT_CSS = """
    SegmentedMarkdown { height: auto; }
    SegmentedMarkdown > Markdown { margin: 0; padding: 0; }
    """

    def __init__(self, markdown: str = "", *, classes: str | None = None) -> None:
        super().__init__(classes=classes)
        self.source = markdown
        """The whole text so far."""
        self._segment_start = 0
        """Where the newest segment begins in `source`."""
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        yield Markdown(self.source)

    async def write(self, text: str) -> None:
        """Append Markdown text."""
        start = len(self.source)
        self.source += text
        cut = None
        if start - self._segment_start >= SEGMENT_CHARS:
            cut = safe_break(self.source, max(start - 1, self._segment_start))
        if cut is None:
            await self._newest_stream().write(text)
            return
        await self._newest_stream().write(self.source[start:cut])
        await self._close_segment()
        self._segment_start = cut
        await self.mount(Markdown())
        if cut < len(self.source):
            await self._newest_stream().write(self.source[cut:])

    async def stop(self) -> None:
        """Finish streaming: everything written is drawn."""
        await self._close_segment()

    def _newest_stream(self) -> MarkdownStream:
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query(Markdown).last())
        return self._stream

    async def _close_segment(self) -> None:
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
