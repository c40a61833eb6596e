"""`ViewActionsScreen`: the chat screen's view, needing no store or backend.

Copying a reply or its code blocks, folding a reply's thinking, and the side panels: which
show at which width, that below `SIDEBAR_MIN_WIDTH` columns only one shows at a time, and
that the speed strip shows whenever the speed panel does not; and a reply's numbers in them,
live and once it ended, with the session's.
"""

from __future__ import annotations

from typing import Final

from textual import events
from textual.screen import Screen
from textual.widget import Widget

from app.backend.protocol import BackendInfo
from app.core.proof_report import ProofReport
from app.storage import MessageStatus
from app.telemetry import ReplyStats
from app.telemetry.health import check_collapse
from app.telemetry.session import summarize_session
from app.textsafe import visible
from app.ui.reply import ReplyRun
from app.ui.widgets.banner import Banner
from app.ui.widgets.messages import ReplyView, code_blocks
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel
from app.ui.widgets.speed_strip import SpeedStrip

SPEED_MIN_WIDTH: Final = 100
"""Below this many columns the speed panel steps aside (F9 brings it back)."""
SIDEBAR_MIN_WIDTH: Final = 120
"""Below this many columns the chat list steps aside (Ctrl+B brings it back), and showing
one side panel hides the other."""


class ViewActionsScreen(Screen[None]):
    """The base of the chat screen: actions over its transcript and panels."""

    HORIZONTAL_BREAKPOINTS = [
        (0, "-narrow"),
        (SPEED_MIN_WIDTH, "-medium"),
        (SIDEBAR_MIN_WIDTH, "-wide"),
    ]

    _code_cursor: tuple[ReplyView, int] | None = None
    """The reply and index of the code block copied last."""
    _wanted: dict[type[Widget], bool] = {}
    """The side panels the user showed (True) or hid (False); the others follow the width."""
    _opened_last: type[Widget] | None = None
    """The side panel shown last: the one that stays when only one fits."""

    def __init__(self) -> None:
        super().__init__()
        self.session_stats: list[ReplyStats] = []
        """Measurements of this session's completed replies, oldest first."""

    def validate_sub_title(self, sub_title: object) -> str | None:
        """The header shows a chat's title with its control characters made visible."""
        return None if sub_title is None else visible(str(sub_title))

    def show_start(self, proof: ProofReport, info: BackendInfo) -> None:
        """The panels before the first reply: the proof, the draft, the replay's speed."""
        self.query_one(Banner).warn(None)
        speed = self.query_one(SpeedPanel)
        speed.show_proof(proof)
        speed.show_session(summarize_session([]))
        speed.show_draft(info.draft)
        speed.replay_speed = info.replay_speed
        self.query_one(SpeedStrip).replay_speed = info.replay_speed

    def reply_progressed(self, run: ReplyRun) -> None:
        """The live numbers of the reply in flight."""
        live = run.live_snapshot()
        self.query_one(SpeedPanel).show_live(live, run.ttft_s)
        self.query_one(SpeedStrip).show_live(live)

    def show_ended(self, run: ReplyRun, *, context_length: int | None, speculative: bool) -> None:
        """How the reply ended, and the session's numbers with its verdict on speculation."""
        status = run.shown_status
        speed = self.query_one(SpeedPanel)
        speed.show_last(status, run.stats, context_length)
        self.query_one(SpeedStrip).show_last(status, run.stats)
        if status is MessageStatus.COMPLETE and run.stats is not None:
            self.session_stats.append(run.stats)
            speed.show_session(summarize_session(self.session_stats))
            verdict = check_collapse(self.session_stats, speculative=speculative)
            self.query_one(Banner).show_verdict(verdict)

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
        self.show_panel(sidebar, not sidebar.display)

    def action_toggle_speed(self) -> None:
        """Show or hide the speed panel."""
        panel = self.query_one(SpeedPanel)
        self.show_panel(panel, not panel.display)

    def show_panel(self, panel: Widget, shown: bool) -> None:
        """Show or hide a side panel; below `SIDEBAR_MIN_WIDTH` columns the other one steps
        aside meanwhile, and comes back once this one is hidden again."""
        self._wanted = {**self._wanted, type(panel): shown}
        if shown:
            self._opened_last = type(panel)
        self._lay_out()

    def on_resize(self, event: events.Resize) -> None:
        self._lay_out()

    def _lay_out(self) -> None:
        """Each side panel as the user asked, else as the width allows; the strip when the
        speed panel is hidden."""
        width = self.size.width
        sidebar = self._wanted.get(Sidebar, width >= SIDEBAR_MIN_WIDTH)
        speed = self._wanted.get(SpeedPanel, width >= SPEED_MIN_WIDTH)
        if sidebar and speed and width < SIDEBAR_MIN_WIDTH:
            sidebar, speed = self._opened_last is Sidebar, self._opened_last is not Sidebar
        self.query_one(Sidebar).display = sidebar
        self.query_one(SpeedPanel).display = speed
        self.query_one(SpeedStrip).display = not speed
