"""A bar per reply on an axis from zero, so that a bar's height is its share of the largest
(580 against 808 tok/s draws 72% against 100%, not empty against full)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from rich.text import Text
from textual.widget import Widget

EIGHTHS: Final = " ▁▂▃▄▅▆▇█"


def bar_rows(values: Sequence[float], width: int, height: int) -> list[str]:
    """The last `width` values as columns `height` rows tall, top row first, scaled from 0
    to the largest value; a value above zero shows at least its lowest eighth."""
    shown = [max(0.0, value) for value in values[-width:]] if width > 0 else []
    top = max(shown, default=0.0)
    eighths = [
        max(1, round(value / top * height * 8)) if top > 0 and value > 0 else 0 for value in shown
    ]
    rows = []
    for row in reversed(range(height)):
        cells = (EIGHTHS[min(8, max(0, n - row * 8))] for n in eighths)
        rows.append("".join(cells))
    return rows


class ReplyBars(Widget):
    """The bars of one series of per-reply figures, newest on the right."""

    DEFAULT_CSS = """
    ReplyBars {
        height: 2;
        color: $accent;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._values: tuple[float, ...] = ()

    def show(self, values: Sequence[float]) -> None:
        self._values = tuple(values)
        self.refresh()

    def render(self) -> Text:
        rows = bar_rows(self._values, self.content_size.width, self.content_size.height)
        return Text("\n".join(rows), no_wrap=True)
