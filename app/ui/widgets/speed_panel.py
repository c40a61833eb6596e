"""The speed panel: live decode numbers, the last reply's final ones, the session, the proof."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Label, Static

from app.backend.protocol import DraftShape
from app.core.proof_report import ProofReport
from app.render.figures import DASH, millis, rate, ratio, seconds
from app.storage import MessageStatus
from app.telemetry import ReplyStats
from app.telemetry.session import SessionSummary
from app.telemetry.windows import LiveSnapshot
from app.ui.format import (
    STATUS_MARKS,
    VERDICT_MARKS,
    VERDICT_STYLES,
    replay_factor,
    visible_text,
)
from app.ui.widgets.reply_bars import ReplyBars


def _rows(*rows: tuple[str, str]) -> Text:
    text = Text()
    for index, (name, value) in enumerate(rows):
        if index:
            text.append("\n")
        text.append(f"{name:<9}", style="dim")
        text.append(value)
    return text


def prompt_line(stats: ReplyStats) -> str:
    """Prompt tokens, and how many SGLang's prefix cache served, e.g. `4,020 (3,812 cached)`."""
    cached = stats.cached_tokens
    return f"{stats.prompt_tokens:,}" + (f" ({cached:,} cached)" if cached else "")


def context_line(stats: ReplyStats, context_length: int | None) -> str:
    """The conversation's share of the context after this reply, e.g. `4,150 / 32,768 (13%)`."""
    if not context_length:
        return DASH
    used = stats.prompt_tokens + stats.completion_tokens
    return f"{used:,} / {context_length:,} ({used / context_length:.0%})"


def draft_line(draft: DraftShape | None) -> str:
    """The draft depth in use, e.g. `3 steps · 4 tokens` or `block 8 · 9 tokens`."""
    if draft is None:
        return DASH
    depth = f"block {draft.block}" if draft.block else _count(draft.steps, "step")
    return f"{depth} · {_count(draft.verify_tokens, 'token')}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


class SpeedPanel(VerticalScroll, can_focus=False):
    """Numbers about decoding speed; the screen feeds it at a throttled rate."""

    replay_speed: float | None = None
    """A replay's speed (its headings say `replay x0.25` when it is not 1); None live."""

    def compose(self) -> ComposeResult:
        yield Label("Live", id="reply-heading", classes="heading")
        yield Static(_rows(("decode", "waiting for a reply")), id="reply-numbers")
        yield Label("Session", id="session-heading", classes="heading")
        yield Label("tok/s per reply", id="tps-label", classes="spark-label")
        yield ReplyBars(id="tps-spark")
        yield Label("accept per reply", id="accept-label", classes="spark-label")
        yield ReplyBars(id="accept-spark")
        yield Static("", id="session-numbers")
        yield Static(_rows(("draft", DASH)), id="draft")
        yield Label("Optimizations", classes="heading")
        yield Static("", id="optimizations")

    def show_live(self, live: LiveSnapshot, ttft_s: float | None) -> None:
        """The reply being streamed: speed now and so far, TPOT, TTFT, tokens per step."""
        factor = replay_factor(self.replay_speed)
        state = f"replay {factor}" if factor else "streaming"
        self.query_one("#reply-heading", Label).update(f"Live ● {state}", layout=False)
        steps = ratio(live.tokens_per_step)
        if live.recent_tokens_per_step is not None:
            steps += f" (now {ratio(live.recent_tokens_per_step)})"
        self.query_one("#reply-numbers", Static).update(
            layout=False,
            content=_rows(
                ("decode", rate(live.recent_tps)),
                ("average", rate(live.average_tps)),
                ("TPOT", millis(live.tpot_s)),
                ("TTFT", seconds(ttft_s)),
                ("tokens", f"{live.tokens:,}"),
                ("tok/step", steps),
            ),
        )

    def show_last(
        self, status: MessageStatus, stats: ReplyStats | None, context_length: int | None = None
    ) -> None:
        """The reply that just ended, with SGLang's final accept statistics.

        With the model's `context_length`, also how much of it the conversation now fills.
        """
        factor = replay_factor(self.replay_speed)  # `x0.5`: the heading stays one line
        heading = f"Last reply {STATUS_MARKS[status]}" + (f" · {factor}" if factor else "")
        self.query_one("#reply-heading", Label).update(heading)
        if stats is None:
            self.query_one("#reply-numbers", Static).update(_rows(("decode", "–")))
            return
        verify = f"{stats.verify_rounds:,} rounds" if stats.verify_rounds else "–"
        self.query_one("#reply-numbers", Static).update(
            _rows(
                ("decode", rate(stats.decode_tps)),
                ("TPOT", millis(stats.tpot_s)),
                ("TTFT", seconds(stats.ttft_s)),
                ("tokens", f"{stats.completion_tokens:,} in {seconds(stats.latency_s)}"),
                ("prompt", prompt_line(stats)),
                ("context", context_line(stats, context_length)),
                ("accept", ratio(stats.accept_length)),
                ("verify", verify),
            )
        )

    def show_session(self, summary: SessionSummary) -> None:
        """Bars per finished reply (each axis from 0 to its largest) and pooled averages."""
        replies = "1 reply" if summary.replies == 1 else f"{summary.replies} replies"
        self.query_one("#session-heading", Label).update(f"Session · {replies}")
        for name, label, series, shown in (
            ("tps", "tok/s per reply", summary.decode_tps_series, "{:,.0f}"),
            ("accept", "accept per reply", summary.accept_length_series, "{:.2f}"),
        ):
            scale = f" (0–{shown.format(max(series))})" if series else ""
            self.query_one(f"#{name}-label", Label).update(label + scale)
            self.query_one(f"#{name}-spark", ReplyBars).show(series)
        self.query_one("#session-numbers", Static).update(
            _rows(
                ("decode", rate(summary.decode_tps)),
                ("accept", ratio(summary.accept_length)),
                ("TTFT", seconds(summary.ttft_s)),
                ("tokens", f"{summary.completion_tokens:,}"),
            )
        )

    def show_draft(self, draft: DraftShape | None) -> None:
        """The draft depth in use (verify tokens bound a round's accept length)."""
        self.query_one("#draft", Static).update(_rows(("draft", draft_line(draft))))

    def show_proof(self, report: ProofReport) -> None:
        """One line per optimization with its verdict from the start-up proof."""
        text = Text(f"profile {report.profile}", style="dim")
        for line in report.lines:
            text.append("\n")
            text.append(f"{VERDICT_MARKS[line.verdict]} ", style=VERDICT_STYLES[line.verdict])
            text.append(line.title)
        self.query_one("#optimizations", Static).update(visible_text(text))
