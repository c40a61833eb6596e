"""The start-up screen: load stages with ticking times, then the proof report."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Final

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, ProgressBar, Static

from app.backend.protocol import BackendInfo, LoadStage
from app.core.proof_report import ProofReport
from app.render.figures import seconds
from app.ui.format import proof_text, visible_text

SPINNER: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
TICK_S: Final = 0.25
PROCEED_KEY: Final = "enter"
"""The one key that leaves the start-up screen once it waits (for the chat, or to exit)."""
SCROLL_KEYS: Final = {
    "up": "scroll_up",
    "down": "scroll_down",
    "pageup": "scroll_page_up",
    "pagedown": "scroll_page_down",
    "home": "scroll_home",
    "end": "scroll_end",
}
"""Keys that scroll the stages and the proof report, and the `Widget` method each calls."""
SCROLL_HELP: Final = "↑ ↓ PgUp PgDn Home End scroll"
NAME_WIDTH: Final = 32
"""Columns of a stage's name before its time; a longer one has its time and detail under it,
so that 80 columns hold them (a step the engine names from SGLang's log is at most 60
characters)."""


@dataclass(slots=True)
class _Stage:
    name: str
    began_s: float
    """Start-up seconds when the stage began (the backend's clock)."""
    seen_at: float
    """Our clock when the stage began."""
    detail: str = ""
    took_s: float | None = None


class StartupScreen(Screen[None]):
    """Shows what the model side is doing while it loads, then what the proof found.

    The scroll keys scroll it at any time; once it waits, only Enter goes on.
    """

    def __init__(self, info: BackendInfo, clock: Callable[[], float]) -> None:
        super().__init__(id="startup")
        self._info = info
        self._clock = clock
        self._started = clock()
        self._stages: dict[str, _Stage] = {}
        self._latest: tuple[float, float] | None = None
        """(start-up seconds, our clock) of the latest stage: elapsed time ticks from it."""
        self._finished_at: float | None = None
        self._entered = asyncio.Event()
        self._wait_for_key = False
        """Enter is awaited."""
        self._scrolled = False
        """A scroll key was pressed while waiting: no timeout goes on by itself any more."""
        self._hint: tuple[str, float | None, str] = ("", None, "")
        """What `wait_for_enter` shows: its hint, timeout and tail."""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="startup-body"):
            info = self._info
            yield Static(
                Text.assemble(
                    ("ling-chat", "bold"),
                    f"  starting {info.model} · {info.kind} · profile {info.profile}",
                ),
                id="startup-title",
            )
            yield Static("", id="stages")
            yield ProgressBar(id="download", show_eta=False)
            yield Static("", id="startup-status")
            yield Static("", id="report")
        yield Static("", id="startup-hint")  # outside the scroll: always on screen
        yield Footer()

    def on_mount(self) -> None:
        self._status("")
        self.query_one("#report").display = False
        self.query_one("#download").display = False
        self.query_one("#startup-hint").display = False
        self._draw()
        self.set_interval(TICK_S, self._draw)

    def show_stage(self, stage: LoadStage) -> None:
        """A stage began or ended."""
        now = self._clock()
        self._latest = (stage.elapsed_s, now)
        known = self._stages.get(stage.name)
        if known is None:
            known = _Stage(stage.name, stage.elapsed_s, now, stage.detail)
            self._stages[stage.name] = known
        elif stage.detail:
            known.detail = stage.detail
        if stage.done:
            known.took_s = max(0.0, stage.elapsed_s - known.began_s)
        self._show_bytes(stage)
        self._draw()

    def _show_bytes(self, stage: LoadStage) -> None:
        """A download's or the weight load's progress bar, shown while bytes are counted."""
        bar = self.query_one("#download", ProgressBar)
        if stage.bytes_total and not stage.done:
            bar.update(total=stage.bytes_total, progress=stage.bytes_done or 0)
            bar.display = True
        elif bar.display:
            bar.display = False

    def show_checking(self) -> None:
        """Loading is over; the proof is being collected."""
        self._finished_at = self._clock()
        self._status("Checking that every optimization is engaged…")

    def show_report(self, report: ProofReport) -> None:
        """The proof report, with the fix for each failed line."""
        if self._finished_at is None:
            self._finished_at = self._clock()
        report_view = self.query_one("#report", Static)
        report_view.update(proof_text(report))
        report_view.display = True
        self._status("")
        self._draw()

    def show_error(self, message: str) -> None:
        """Start-up failed: one line."""
        if self._finished_at is None:
            self._finished_at = self._clock()
        self._status(Text(f"✗ {message}", style="bold red"))

    async def wait_for_enter(
        self, hint: str, *, timeout_s: float | None = None, tail: str = ""
    ) -> None:
        """Show `hint` (which names Enter), the scroll keys and `tail`; return once Enter is
        pressed, or after `timeout_s` unless the user scrolled meanwhile (then only Enter)."""
        self._entered.clear()
        self._wait_for_key, self._scrolled = True, False
        self._hint = (hint, timeout_s, tail)
        self._show_hint()
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        try:
            while not self._entered.is_set():
                left = None if deadline is None or self._scrolled else deadline - loop.time()
                if left is not None and left <= 0:
                    return
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._entered.wait(), left)
        finally:
            self._wait_for_key = False

    def _show_hint(self) -> None:
        hint, timeout_s, tail = self._hint
        if timeout_s and not self._scrolled:
            hint += f" (by itself in {timeout_s:g} s, unless you scroll)"
        shown = self.query_one("#startup-hint", Static)
        shown.update(Text(" · ".join(filter(None, (hint, SCROLL_HELP, tail))) + ".", style="bold"))
        shown.display = True

    def on_key(self, event: events.Key) -> None:
        if event.key in SCROLL_KEYS:
            event.stop()
            if self._wait_for_key and not self._scrolled:
                self._scrolled = True
                self._show_hint()
            body = self.query_one("#startup-body", VerticalScroll)
            getattr(body, SCROLL_KEYS[event.key])(animate=False)
        elif self._wait_for_key:
            event.stop()
            if event.key == PROCEED_KEY:
                self._entered.set()

    def _status(self, status: str | Text) -> None:
        widget = self.query_one("#startup-status", Static)
        widget.update(visible_text(Text(status) if isinstance(status, str) else status))
        widget.display = bool(status)

    def _draw(self) -> None:
        now = self._clock()
        frame = SPINNER[int(now / TICK_S) % len(SPINNER)]
        text = Text()
        for stage in self._stages.values():
            if stage.took_s is not None:
                mark, took = "✓", stage.took_s
            elif self._finished_at is None:
                mark, took = frame, now - stage.seen_at
            else:
                mark, took = "·", self._finished_at - stage.seen_at
            text.append(f" {mark} ", style="green" if mark == "✓" else "yellow")
            if len(stage.name) > NAME_WIDTH:  # the load's: its time and detail under it
                text.append(f"{stage.name}\n     ")
                text.append(seconds(took), style="bold")
            else:
                text.append(f"{stage.name:<{NAME_WIDTH}}")
                text.append(f"{seconds(took):>9}", style="bold")
            if stage.detail:
                text.append(f"   {stage.detail}", style="dim")
            text.append("\n")
        end = self._finished_at if self._finished_at is not None else now
        elapsed = end - self._started
        if self._latest is not None:
            elapsed = self._latest[0] + end - self._latest[1]
        text.append(f"\n Elapsed {seconds(elapsed)}", style="dim")
        if self._finished_at is None:
            text.append("   ·   Ctrl+C cancels", style="dim")
        self.query_one("#stages", Static).update(visible_text(text))
