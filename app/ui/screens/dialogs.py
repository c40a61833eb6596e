"""Modal dialogs: confirm, rename, per-chat settings, help, and read-only reports.

Each fits the terminal: at most its width and 90% of its height; a longer one scrolls in its
box (the focused field is scrolled into view, the box itself takes the scroll keys).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from rich.console import RenderableType
from rich.table import Table
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Static, TextArea

from app.core.chat import DEFAULT_THINKING, MAX_THINKING_BUDGET, Sampling, Thinking
from app.textsafe import visible
from app.ui.bindings import ALL_ACTIONS, action_by_id, keys_for

T = TypeVar("T")


class Dialog(ModalScreen[T]):
    """A modal that Escape closes with no result."""

    BINDINGS = [Binding("escape", "close", "Close", show=False)]

    def action_close(self) -> None:
        """Close without a result."""
        self.dismiss(None)


class ConfirmDialog(Dialog[bool]):
    """Asks a yes/no question; the result is True for yes."""

    def __init__(self, question: str, confirm: str = "Delete") -> None:
        super().__init__(classes="dialog")
        self._question = question
        self._confirm = confirm

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box", can_focus=False):
            yield Static(visible(self._question), markup=False)
            with Horizontal(classes="dialog-buttons"):
                yield Button(self._confirm, variant="error", id="yes")
                yield Button("Cancel", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    @on(Button.Pressed)
    def _answer(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class RenameDialog(Dialog[str]):
    """Asks for a new title; the result is the non-empty title."""

    def __init__(self, title: str) -> None:
        super().__init__(classes="dialog")
        self._title = title

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box", can_focus=False):
            yield Label("Rename chat")
            yield Input(visible(self._title), id="title")
            yield Label("Enter saves · Esc cancels", classes="dialog-hint")

    @on(Input.Submitted, "#title")
    def _save(self, event: Input.Submitted) -> None:
        title = event.value.strip()
        unchanged = event.value == visible(self._title)  # the stored title keeps its bytes
        self.dismiss(None if unchanged else title or None)


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """A conversation's system prompt, sampling and thinking."""

    system_prompt: str
    sampling: Sampling
    thinking: Thinking = DEFAULT_THINKING


THINKING_BUDGET = "Thinking budget"
_FIELDS = (
    ("temperature", "Temperature (0–2)", float, 0.0, 2.0),
    ("top_p", "Top-p (0–1]", float, 1e-9, 1.0),
    ("top_k", "Top-k (-1 = off)", int, -1, None),
    ("max_new_tokens", "Max new tokens", int, 1, 131072),
)


class SettingsDialog(Dialog[ChatSettings]):
    """Edits one conversation's system prompt and sampling parameters."""

    BINDINGS = [Binding("ctrl+s", "save", "Save", show=False)]

    def __init__(
        self,
        current: ChatSettings,
        on_save_preset: Callable[[ChatSettings], None] | None = None,
    ) -> None:
        """`on_save_preset`: given the checked fields when "Save as preset…" is pressed."""
        super().__init__(classes="dialog")
        self._current = current
        self._on_save_preset = on_save_preset

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box settings", can_focus=False):
            yield Label("This chat's settings", classes="heading")
            yield Label("System prompt")
            yield TextArea(visible(self._current.system_prompt), id="system-prompt")
            with Grid(id="sampling"):
                for name, label, *_ in _FIELDS:
                    yield Label(label)
                    yield Input(str(getattr(self._current.sampling, name)), id=name)
                thinking = self._current.thinking
                yield Label("Thinking")
                yield Checkbox("on", thinking.enabled, id="thinking")
                yield Label(THINKING_BUDGET)
                yield Input(str(thinking.budget or ""), placeholder="no cap", id="thinking-budget")
            yield Label("", id="settings-error", classes="error")
            yield Label("Ctrl+S saves · Esc cancels", classes="dialog-hint")
            with Horizontal(classes="dialog-buttons"):
                if self._on_save_preset is not None:
                    yield Button("Save as preset…", id="save-preset")
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    @on(Button.Pressed, "#cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        """Check the fields and close with the new settings."""
        if (settings := self._checked()) is not None:
            self.dismiss(settings)

    @on(Button.Pressed, "#save-preset")
    def _save_preset(self) -> None:
        if self._on_save_preset is not None and (settings := self._checked()) is not None:
            self._on_save_preset(settings)

    def _checked(self) -> ChatSettings | None:
        """The settings the fields hold, or None after showing the first bad one."""
        values: dict[str, float] = {}
        for name, label, kind, low, high in _FIELDS:
            raw = self.query_one(f"#{name}", Input).value.strip()
            try:
                value = kind(raw)
            except ValueError:
                value = math.nan
            if isinstance(value, float) and not math.isfinite(value):  # float() reads "nan"
                self._error(f"{label}: {raw!r} is not a number")
                return None
            if value < low or (high is not None and value > high):
                self._error(f"{label}: {raw} is out of range")
                return None
            values[name] = value
        sampling = Sampling(
            temperature=values["temperature"],
            top_p=values["top_p"],
            top_k=int(values["top_k"]),
            max_new_tokens=int(values["max_new_tokens"]),
        )
        raw = self.query_one("#thinking-budget", Input).value.strip()
        budget = int(raw) if raw.isdigit() and raw.isascii() else None
        if raw and (budget is None or not 1 <= budget <= MAX_THINKING_BUDGET):
            self._error(f"{THINKING_BUDGET}: {raw!r} is not 1 to {MAX_THINKING_BUDGET} tokens")
            return None
        thinking = Thinking(self.query_one("#thinking", Checkbox).value, budget)
        prompt = self.query_one("#system-prompt", TextArea).text
        if prompt == visible(self._current.system_prompt):  # untouched: keep its exact bytes
            prompt = self._current.system_prompt
        return ChatSettings(prompt, sampling, thinking)

    def _error(self, message: str) -> None:
        error = self.query_one("#settings-error", Label)
        error.update(message)
        error.display = True
        error.scroll_visible(animate=False)


class HelpScreen(Dialog[None]):
    """Every action with its keys and binding id (the id remaps it in config.toml)."""

    BINDINGS = [Binding("f1", "close", "Close", show=False)]

    def __init__(self, keymap: Mapping[str, str]) -> None:
        super().__init__(classes="dialog")
        self._keymap = keymap

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box help"):
            palette = keys_for(action_by_id("command_palette"), self._keymap)
            yield Label(f"Keys and commands ({palette} searches them)", classes="heading")
            yield Static(key_table(self._keymap), id="keys")
            edit, stop, up, left = (
                keys_for(action_by_id(i), self._keymap)
                for i in ("edit_message", "stop_reply", "select_previous", "previous_alternative")
            )
            yield Static(
                f"{edit} puts the selected message ({up} and below: the last) in the prompt; "
                f"sent, it starts a branch and the old one is kept ({stop} cancels). A reply "
                f"or message with alternatives shows its place, e.g. 2/3 ({left} and next).\n"
                "In the prompt Enter starts a new line, Tab indents and Shift+Tab moves on.\n"
                "Click a code block to copy it.\n"
                "Remap a key by its binding id in config.toml, e.g.\n"
                '  [keymap]\n  stop_reply = "ctrl+x"\n'
                "↑ ↓ PgUp PgDn scroll · Esc closes this help.",
                classes="dialog-hint",
                markup=False,
            )


def key_table(keymap: Mapping[str, str]) -> Table:
    """Every action: its keys (as remapped), what it does, its binding id."""
    table = Table("Keys", "Action", "Binding id", box=None, expand=True, header_style="bold")
    table.columns[0].no_wrap = table.columns[2].no_wrap = True
    for action in ALL_ACTIONS:
        table.add_row(keys_for(action, keymap), action.description, action.id)
    return table


class ReportScreen(Dialog[None]):
    """A read-only report in a scrolling box: the proof report, speed by context."""

    def __init__(self, report: RenderableType) -> None:
        super().__init__(classes="dialog")
        self._report = report

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog-box report"):
            yield Static(self._report)
            yield Label("Esc closes", classes="dialog-hint")
