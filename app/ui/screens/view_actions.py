"""`ViewActionsScreen`: the chat screen's actions on what it shows, needing no store or backend.

Copying a reply or its code blocks, folding a reply's thinking, and hiding the side panels.
"""

from __future__ import annotations

from textual.screen import Screen

from app.ui.widgets.messages import ReplyView, code_blocks
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel


class ViewActionsScreen(Screen[None]):
    """The base of the chat screen: actions over its transcript and panels."""

    _code_cursor: tuple[ReplyView, int] | None = None
    """The reply and index of the code block copied last."""

    def _target_reply(self) -> ReplyView | None:
        """The focused reply, else the last one with an answer."""
        if self.focused is not None:
            for node in self.focused.ancestors_with_self:
                if isinstance(node, ReplyView):
                    return node
        replies = [view for view in self.query(ReplyView) if view.answer]
        return replies[-1] if replies else None

    def action_copy_reply(self) -> None:
        """Copy the answer of the last (or focused) reply."""
        view = self._target_reply()
        if view is None:
            self.notify("There is no reply to copy.")
            return
        self.app.copy_to_clipboard(view.answer)
        self.notify(f"Copied the reply ({len(view.answer):,} characters).")

    def action_copy_code(self) -> None:
        """Copy a code block of the last reply: the last one, then the one before, …"""
        view = self._target_reply()
        blocks = code_blocks(view.answer) if view is not None else []
        if view is None or not blocks:
            self.notify("There is no code block to copy.")
            return
        index = len(blocks) - 1
        if self._code_cursor is not None and self._code_cursor[0] is view:
            index = (self._code_cursor[1] - 1) % len(blocks)
        self._code_cursor = (view, index)
        language, code = blocks[index]
        self.app.copy_to_clipboard(code)
        label = f" ({language})" if language else ""
        self.notify(f"Copied code block {index + 1} of {len(blocks)}{label}.")

    def action_toggle_reasoning(self) -> None:
        """Fold or unfold the thinking of the last (or focused) reply."""
        replies = [view for view in self.query(ReplyView) if view.reasoning]
        focused = self._target_reply()
        view = focused if focused in replies else (replies[-1] if replies else None)
        if view is not None:
            view.thinking.collapsed = not view.thinking.collapsed

    def action_toggle_sidebar(self) -> None:
        """Show or hide the chat list."""
        sidebar = self.query_one(Sidebar)
        sidebar.display = not sidebar.display

    def action_toggle_speed(self) -> None:
        """Show or hide the speed panel."""
        panel = self.query_one(SpeedPanel)
        panel.display = not panel.display
