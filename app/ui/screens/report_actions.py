"""`ReportActionsScreen`: the chat screen's reports (the proof, speed by context), and store
errors shown as one-line notices."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rich.text import Text

from app.core.errors import StorageError
from app.render.speed import speed_by_context
from app.ui.chat_context import ChatContext
from app.ui.format import proof_text
from app.ui.screens.dialogs import ReportScreen
from app.ui.screens.view_actions import ViewActionsScreen


class ReportActionsScreen(ViewActionsScreen):
    """The base of the chat screen: its reports, over the chat's context."""

    _ctx: ChatContext

    @contextmanager
    def _storage_errors_reported(self) -> Iterator[None]:
        """Run store calls; a StorageError ends the block with a one-line error notice."""
        try:
            yield
        except StorageError as exc:
            self.notify(str(exc), severity="error")

    def action_show_proof(self) -> None:
        """Show the start-up proof report."""
        self.app.push_screen(ReportScreen(proof_text(self._ctx.proof)))

    def action_speed_by_context(self) -> None:
        """Show how decoding slowed as the stored conversations grew."""
        with self._storage_errors_reported():
            report = speed_by_context(self._ctx.store)
            title = Text("Speed by context length (prompt tokens)\n\n", style="bold")
            self.app.push_screen(ReportScreen(title + Text(report)))
