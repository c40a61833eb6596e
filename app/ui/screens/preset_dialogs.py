"""Dialogs for presets: naming one being saved, and picking one for a new chat."""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Checkbox, Input, Label, OptionList
from textual.widgets.option_list import Option

from app.prefs.presets import MAX_NAME_CHARS, Presets
from app.textsafe import visible
from app.ui.screens.dialogs import Dialog


@dataclass(frozen=True, slots=True)
class PresetName:
    """The name a preset is saved under, and whether it becomes the default."""

    name: str
    default: bool


class PresetNameDialog(Dialog[PresetName]):
    """Asks for a preset's name (one of the same name is replaced) and whether new chats
    start with it."""

    def __init__(self, presets: Presets) -> None:
        super().__init__(classes="dialog")
        self._presets = presets

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label("Save these settings as a preset", classes="heading")
            yield Input(placeholder="its name", id="preset-name", max_length=MAX_NAME_CHARS)
            yield Checkbox("Start every new chat with it (the default)", id="preset-default")
            names = ", ".join(p.name for p in self._presets.presets) or "none yet"
            yield Label(
                visible(f"Presets: {names} · Enter saves · Esc cancels"),
                classes="dialog-hint",
                markup=False,
            )

    @on(Input.Submitted, "#preset-name")
    def _name_given(self, event: Input.Submitted) -> None:
        name = event.value.strip()
        if name:
            default = self.query_one("#preset-default", Checkbox).value
            self.dismiss(PresetName(name, default))


class PresetPicker(Dialog[str]):
    """Picks the preset a new chat starts with; the result is its name ("" for none)."""

    def __init__(self, presets: Presets) -> None:
        super().__init__(classes="dialog")
        self._presets = presets

    def compose(self) -> ComposeResult:
        options = [Option("No preset: the config file's sampling", id="")]
        for preset in self._presets.presets:
            mark = " (default)" if preset.name == self._presets.default else ""
            options.append(Option(visible(preset.name + mark), id=preset.name))
        with Vertical(classes="dialog-box"):
            yield Label("New chat from a preset", classes="heading")
            yield OptionList(*options, id="preset-list")
            yield Label("Enter starts the chat · Esc cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        listed = self.query_one("#preset-list", OptionList)
        names = [p.name for p in self._presets.presets]
        default = self._presets.default
        listed.highlighted = names.index(default) + 1 if default in names else 0
        listed.focus()

    @on(OptionList.OptionSelected, "#preset-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id or "")
