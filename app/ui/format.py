"""Formatting of numbers, reply stats and the proof report for display."""

from __future__ import annotations

from typing import Final

from rich.text import Span, Text

from app.core.proof_report import ProofReport, Verdict
from app.render.figures import SEPARATOR, seconds, speed_parts
from app.render.proof import INDENT, proof_rows
from app.storage import MessageStatus
from app.telemetry import ReplyStats
from app.textsafe import is_safe, visible

VERDICT_MARKS: Final = {Verdict.PASS: "✓", Verdict.FAIL: "✗", Verdict.OFF: "○"}
VERDICT_STYLES: Final = {Verdict.PASS: "green", Verdict.FAIL: "bold red", Verdict.OFF: "dim"}
STATUS_MARKS: Final = {
    MessageStatus.COMPLETE: "✓",
    MessageStatus.STOPPED: "■ stopped",
    MessageStatus.CUT: "✂ cut off",
    MessageStatus.PARTIAL: "… partial",
    MessageStatus.ERROR: "✗ error",
}


def visible_text(text: Text) -> Text:
    """A Rich `Text` with its control characters made visible (`app.textsafe`), styles kept."""
    if is_safe(text.plain):
        return text
    result = Text(style=text.style, justify=text.justify, no_wrap=text.no_wrap, end=text.end)
    cuts = sorted({span.start for span in text.spans} | {span.end for span in text.spans})
    for part in text.divide(cuts):
        shown = visible(part.plain)
        spans = [Span(0, len(shown), span.style) for span in part.spans]
        result.append_text(Text(shown, style=part.style, spans=spans))
    return result


def stats_line(status: MessageStatus, stats: ReplyStats | None, why: str | None = None) -> str:
    """The line under a finished reply, e.g. `✓ 612 tok/s · TPOT 1.63 ms · … · accept 3.12 ·
    1,234 tokens in 2.31 s`; `why`: its error, or the limit that cut it off."""
    mark = STATUS_MARKS[status] + (f": {visible(why)}" if why else "")
    if stats is None:
        return mark
    tokens = f"{stats.completion_tokens:,} tokens in {seconds(stats.latency_s)}"
    separator = " " if status is MessageStatus.COMPLETE else SEPARATOR
    return separator.join([mark, SEPARATOR.join([*speed_parts(stats), tokens])])


def replay_factor(speed: float | None) -> str:
    """`x0.25` for a replay played faster or slower than recorded; empty at x1 or live."""
    return "" if speed is None or speed == 1.0 else f"x{speed:g}"


def replay_label(speed: float | None) -> str:
    """What a replay is, e.g. `replay x0.25 of a recorded session`."""
    factor = replay_factor(speed)
    return f"replay {factor} of a recorded session" if factor else "replay of a recorded session"


def proof_text(report: ProofReport, *, fixes: bool = True) -> Text:
    """The proof report, a line per optimization with its evidence (and fix if it failed)."""
    title = "Proof: all optimizations engaged" if report.ok else "Proof FAILED"
    text = Text.assemble((title, "bold" if report.ok else "bold red"), f"  ({report.summary()})")
    for line, fix in proof_rows(report, fixes=fixes):
        mark, style = VERDICT_MARKS[line.verdict], VERDICT_STYLES[line.verdict]
        text.append("\n")
        text.append(f" {mark} {line.verdict.value.upper():<4} ", style=style)
        text.append(line.title, style="bold")
        text.append(
            f"\n{INDENT}{line.evidence}", style="dim" if line.verdict is Verdict.OFF else ""
        )
        if fix:
            text.append(f"\n{INDENT}fix: {fix}", style="yellow")
    return visible_text(text)


TITLE_CHARS: Final = 48


def title_from(text: str) -> str:
    """A conversation title from its first message."""
    line = " ".join(next((part for part in text.splitlines() if part.strip()), text).split())
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
