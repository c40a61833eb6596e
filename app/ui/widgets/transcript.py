"""The transcript: the open conversation's messages, and the reply streaming into it.

The transcript only shows; `ReplyController` drives the reply into the `ReplyView` that
`add_reply` mounts.
"""

from __future__ import annotations

from collections.abc import Sequence

from textual.containers import VerticalScroll
from textual.widget import Widget

from app.storage import StoredMessage
from app.ui.widgets.messages import ReplyView


class Transcript(VerticalScroll):
    """Messages of the open conversation, kept scrolled to the end while a reply grows."""

    async def show(self, widgets: Sequence[Widget], found: Widget | None = None) -> None:
        """Replace the contents; scroll to `found` (marked), else to the end."""
        await self.remove_children()
        await self.mount_all(widgets)
        if found is None:
            self.anchor()
        else:
            self.anchor(False)
            self.scroll_to_widget(found, top=True, animate=False)
            found.add_class("found")

    def reply(self, message: StoredMessage) -> ReplyView:
        """The shown reply of a stored message, streaming again (it is being continued)."""
        view = next(v for v in self.query(ReplyView) if v.message_id == message.id)
        view.resume()
        self.anchor()
        return view

    async def add_reply(self) -> ReplyView:
        """A new, streaming reply at the end."""
        view = ReplyView(streaming=True)
        await self.mount(view)
        self.anchor()
        return view
