"""`ExchangeEdit`: an edit in progress (F4).

The message taken back into the prompt, and what follows it on screen, stay marked until
the edit is sent; then the edited message is stored beside it, a new branch, and the old
branch is kept (`app.storage.tree`). Cancelling (Esc, another chat, quitting) leaves all as
it was. Meanwhile the prompt's title says how to send or cancel (sending clears it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from textual.widget import Widget
from textual.widgets import TextArea

from app.storage import StoredMessage
from app.textsafe import visible

EDITING: Final = "editing"
"""The CSS class of the messages of the exchange being edited."""
EDIT_NOTE: Final = "being edited: kept as a branch of its own"


@dataclass(frozen=True, slots=True)
class ExchangeEdit:
    """The user message being edited, and the prompt's text from before."""

    message_ids: tuple[int, ...]
    """The user message and every message after it on screen, oldest first."""
    text: str
    """The user message's stored text."""
    draft: str
    """What the prompt held before, given back when the edit is cancelled."""

    @classmethod
    def begin(
        cls, taken: Sequence[StoredMessage], prompt: TextArea, transcript: Widget, hint: str
    ) -> ExchangeEdit | None:
        """Mark `taken` (a user message and what follows it) and put the message in the
        prompt, `hint` in its title; None when `taken` is empty."""
        if not taken:
            return None
        edit = cls(tuple(message.id for message in taken), taken[0].content, prompt.text)
        edit._mark(transcript, editing=True)
        prompt.load_text(visible(edit.text))
        prompt.border_title = hint
        prompt.move_cursor(prompt.document.end)
        prompt.focus()
        return edit

    def cancel(self, prompt: TextArea, transcript: Widget) -> None:
        """Leave the exchange as it was and give the prompt back what it held."""
        self._mark(transcript, editing=False)
        prompt.load_text(self.draft)
        prompt.border_title = ""

    def widgets(self, transcript: Widget) -> list[Widget]:
        """The transcript's widgets of the exchange."""
        ids = self.message_ids
        return [w for w in transcript.children if getattr(w, "message_id", None) in ids]

    def _mark(self, transcript: Widget, editing: bool) -> None:
        for widget in self.widgets(transcript):
            widget.set_class(editing, EDITING)
            widget.border_subtitle = EDIT_NOTE if editing else ""
