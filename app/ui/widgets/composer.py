"""The prompt: a TextArea whose pasted control characters show made visible but are sent,
and where Tab indents (Shift+Tab moves on; Esc keeps its bindings).

A paste holding characters a terminal acts on (`app.textsafe`) goes into the document made
visible (`␛`, `⟨U+202E⟩`), so the screen never draws them raw, and is remembered: `message`
puts the exact pasted characters back wherever that pasted text is still whole. A pasted
text the user then edited is sent as shown. Line breaks are the TextArea's: CRLF and CR
become newlines, as for any paste. A pasted ESC comes from the terminal as `ESC_STAND_IN`
(`app.ui.paste_input`) and goes back to ESC here.

Its hint (the border's subtitle) is the longest of its `hints` that fits the width, so that a
narrow prompt (the speed panel beside it at 80 columns) keeps its keys whole.
"""

from __future__ import annotations

from typing import Final

from textual import events
from textual.widgets import TextArea
from textual.widgets.text_area import EditResult

from app.textsafe import is_safe, visible
from app.ui.paste_input import ESC, ESC_STAND_IN

HINT_MARGIN: Final = 6
"""Columns of the bottom border a hint cannot take: the corners and `─ ` either side."""


class Composer(TextArea):
    """The chat's prompt."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._pasted: dict[str, str] = {}
        """What a paste showed -> the characters it held."""
        self._hints: tuple[str, ...] = ()

    def show_hints(self, *hints: str) -> None:
        """Show the longest of `hints` (longest first) that fits, the last when none does."""
        self._hints = hints
        self._fit_hint()

    def on_resize(self, event: events.Resize) -> None:
        self._fit_hint()

    def _fit_hint(self) -> None:
        room = self.outer_size.width - HINT_MARGIN
        fits = [hint for hint in self._hints if len(hint) <= room]
        self.border_subtitle = (fits or self._hints[-1:] or [""])[0]

    @property
    def message(self) -> str:
        """The text to send: the document, with each whole paste's exact characters."""
        text = self.text
        for shown in sorted(self._pasted, key=len, reverse=True):
            text = text.replace(shown, self._pasted[shown])
        return text

    def load_exact(self, text: str) -> None:
        """Put `text` in the prompt, shown as a paste is (control characters made visible),
        sent as it is."""
        self._pasted.clear()
        shown = visible(text)
        if shown != text:
            self._pasted[shown] = text
        self.load_text(shown)

    def clear(self) -> EditResult:
        """Empty the prompt and forget its pastes and title (an edit's hint: it was sent)."""
        self._pasted.clear()
        self.border_title = ""
        return super().clear()

    def check_consume_key(self, key: str, character: str | None = None) -> bool:
        return (key == "tab" and not self.read_only) or super().check_consume_key(key, character)

    async def _on_key(self, event: events.Key) -> None:
        """Tab inserts spaces to the next tab stop (TextArea's own indent mode would also take
        Esc, which stops a reply)."""
        if event.key != "tab" or self.read_only:
            await super()._on_key(event)
            return
        event.stop()
        event.prevent_default()
        row, column = self.cursor_location
        width = self.get_column_width(row, column)
        start, end = self.selection
        self.replace(" " * (self.indent_width - width % self.indent_width), start, end)

    async def _on_paste(self, event: events.Paste) -> None:
        """A paste with characters to make visible; TextArea's own handler takes the rest."""
        text = event.text.replace("\r\n", "\n").replace("\r", "\n").replace(ESC_STAND_IN, ESC)
        if is_safe(text) or self.read_only:
            return
        event.prevent_default()  # TextArea's handler would insert the raw text
        shown = visible(text)
        self._pasted[shown] = text
        if result := self._replace_via_keyboard(shown, *self.selection):
            self.move_cursor(result.end_location)
            self.focus()
