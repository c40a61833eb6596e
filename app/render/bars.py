"""Horizontal bar charts in plain text, in eighths of a character cell."""

from __future__ import annotations

from collections.abc import Sequence

_EIGHTHS = "▏▎▍▌▋▊▉"
CEILING = "┆"


def bar(value: float, scale: float, width: int) -> str:
    """`value` as a bar where `scale` fills `width` cells (longer values are clipped)."""
    eighths = round(max(0.0, min(value / scale, 1.0)) * width * 8)
    full, rest = divmod(eighths, 8)
    return "█" * full + (_EIGHTHS[rest - 1] if rest else "")


def bars(
    items: Sequence[tuple[str, float | None, float | None]], *, width: int = 48, unit: str = ""
) -> str:
    """One line per (label, value, ceiling): the bar, a `┆` at the ceiling, the value.

    The longest value or ceiling fills `width`; a missing value draws no bar.
    """
    known = [x for _, value, ceiling in items for x in (value, ceiling) if x is not None]
    scale = max(known, default=0.0) or 1.0
    label_width = max((len(label) for label, _, _ in items), default=0)
    lines = []
    for label, value, ceiling in items:
        cells = list(bar(value or 0.0, scale, width).ljust(width))
        if ceiling is not None:
            at = min(int(ceiling / scale * width), width - 1)
            if cells[at] == " ":
                cells[at] = CEILING
        shown = "—" if value is None else f"{value:.2f}{' ' + unit if unit else ''}"
        lines.append(f"{label.ljust(label_width)}  {''.join(cells)}  {shown}".rstrip())
    return "\n".join(lines)
