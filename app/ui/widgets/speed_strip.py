"""The speed strip: the reply's headline figures on one row, wherever the speed panel is not."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from app.render.figures import SEPARATOR, live_parts, speed_parts
from app.storage import MessageStatus
from app.telemetry import ReplyStats
from app.telemetry.windows import LiveSnapshot
from app.ui.format import STATUS_MARKS, replay_factor


class SpeedStrip(Static):
    """One row: live figures while a reply streams, then the last reply's; the screen shows
    it while the speed panel is hidden."""

    def __init__(self, panel_keys: str, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._panel_keys = panel_keys
        self.replay_speed: float | None = None
        """A replay's speed (`replay x0.25` is said when it is not 1); None live."""

    def on_mount(self) -> None:
        self._show("", [f"speed: waiting for a reply · {self._panel_keys} shows the panel"])

    def show_live(self, live: LiveSnapshot) -> None:
        """The reply being streamed."""
        self._show("● ", live_parts(live), style="bold")

    def show_last(self, status: MessageStatus, stats: ReplyStats | None) -> None:
        """The reply that just ended, with its final figures (the accept length among them)."""
        parts = speed_parts(stats) if stats is not None else []
        gap = " " if status is MessageStatus.COMPLETE else SEPARATOR  # `■ stopped · 612 tok/s`
        self._show(STATUS_MARKS[status] + gap, parts or ["no figures"])

    def _show(self, heading: str, parts: list[str], style: str = "") -> None:
        factor = replay_factor(self.replay_speed)
        text = Text(heading, style=style)
        if factor:
            text.append(f"replay {factor} ", style="dim")
        text.append(SEPARATOR.join(parts))
        self.update(text)
