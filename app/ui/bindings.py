"""Every key binding of the app, each with an id the config file's `keymap` can remap."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from textual.binding import Binding

from app.core.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Action:
    """One user action: its binding id, default keys, action name and help text."""

    id: str
    keys: str
    action: str
    description: str
    footer: str = ""
    """Shown in the footer under this short label (the description elsewhere); empty: not
    in the footer. The footer's labels fit 80 columns whole."""
    priority: bool = True
    """Wins over the focused widget (the prompt would otherwise take some keys)."""

    def binding(self) -> Binding:
        """The Textual binding."""
        return Binding(
            self.keys,
            self.action,
            self.footer or self.description,
            show=bool(self.footer),
            priority=self.priority,
            id=self.id,
        )


APP_ACTIONS: Final = (
    Action("help", "f1", "help", "Keys & help", footer="Help"),
    Action("command_palette", "ctrl+p", "command_palette", "Commands"),
    Action("quit", "ctrl+c,ctrl+q", "quit", "Quit", footer="Quit"),
)
"""Actions available on every screen."""

CHAT_ACTIONS: Final = (
    # Not a priority binding: it must queue behind the keys typed just before it.
    Action("send", "ctrl+s", "send", "Send", footer="Send", priority=False),
    Action("stop_reply", "escape", "stop_reply", "Stop reply", footer="Stop", priority=False),
    Action("new_chat", "ctrl+n", "new_chat", "New chat", footer="New chat"),
    Action(
        "regenerate",
        "ctrl+r",
        "regenerate",
        "Regenerate reply (old one kept)",
        footer="Regenerate",
    ),
    Action(
        "continue_reply", "ctrl+g", "continue_reply", "Continue last reply (cut off or stopped)"
    ),
    Action("edit_message", "f4", "edit_message", "Edit message (starts a branch)"),
    Action("previous_alternative", "alt+left", "switch_alternative(-1)", "Previous alternative"),
    Action("next_alternative", "alt+right", "switch_alternative(1)", "Next alternative"),
    Action("select_previous", "alt+up", "select_message(-1)", "Select the message above"),
    Action("select_next", "alt+down", "select_message(1)", "Select the message below"),
    Action("copy_reply", "f5", "copy_reply", "Copy last reply"),
    Action("copy_code", "f6", "copy_code", "Copy a code block (again: the one before)"),
    Action("search", "ctrl+f", "search", "Search chats"),
    Action("rename_chat", "f2", "rename_chat", "Rename chat"),
    Action("delete_chat", "f8", "delete_chat", "Delete chat"),
    Action("chat_settings", "f3", "chat_settings", "System prompt & sampling"),
    Action("toggle_reasoning", "ctrl+t", "toggle_reasoning", "Show/hide thinking"),
    Action("toggle_sidebar", "ctrl+b", "toggle_sidebar", "Show/hide chat list"),
    Action("toggle_speed", "f9", "toggle_speed", "Show/hide speed panel"),
    Action("show_proof", "f12", "show_proof", "Proof report"),
    Action("speed_by_context", "f7", "speed_by_context", "Speed by context length"),
    Action("attach_file", "ctrl+o", "attach_file", "Attach a file's text to the prompt"),
    Action("open_editor", "ctrl+e", "open_editor", "Edit the prompt in $VISUAL / $EDITOR"),
    Action("recall_earlier", "up", "recall_earlier", "Recall an earlier prompt (empty prompt)"),
    Action("recall_later", "down", "recall_later", "Recall a later prompt (while recalling)"),
    Action("export_chat", "ctrl+l", "export_chat", "Export this chat (Markdown, HTML, JSON)"),
)
"""Actions of the chat screen."""

ALL_ACTIONS: Final = APP_ACTIONS + CHAT_ACTIONS


_KEY_NAMES: Final = {"escape": "Esc", "enter": "Enter", "delete": "Del", "tab": "Tab", "up": "Up"}


def pretty_keys(keys: str) -> str:
    """Keys as people write them: `ctrl+s,escape` -> `Ctrl+S / Esc`."""

    def pretty(key: str) -> str:
        *mods, name = key.strip().split("+")
        name = _KEY_NAMES.get(name, name.upper() if len(name) <= 3 else name.capitalize())
        return "+".join([*(m.capitalize() for m in mods), name])

    return " / ".join(pretty(key) for key in keys.split(","))


def action_by_id(action_id: str) -> Action:
    """The action with this binding id."""
    return next(action for action in ALL_ACTIONS if action.id == action_id)


def keys_for(action: Action, keymap: Mapping[str, str]) -> str:
    """The keys `action` is bound to once the user's keymap is applied, for display."""
    return pretty_keys(keymap.get(action.id, action.keys))


_MODIFIERS: Final = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})


def _key_names() -> frozenset[str]:
    """Every key name Textual can deliver: named keys, and printable ASCII by char or name."""
    from textual.keys import Keys, _character_to_key

    named = {key.value.split("+")[-1] for key in Keys if not key.value.startswith("<")}
    printable = [chr(code) for code in range(33, 127)]
    return frozenset(named | set(printable) | {_character_to_key(c) for c in printable})


def _split(keys: str) -> list[str]:
    return [key.strip() for key in keys.split(",")]


def check_keymap(keymap: Mapping[str, str], where: str) -> None:
    """Refuse a keymap entry naming no action, with an empty or unknown key, or taking a key
    another action keeps.

    Raises:
        ConfigError: one line naming `where` (the config file or variable), entry and key.
    """
    names = _key_names()
    ids = [action.id for action in ALL_ACTIONS]
    for action_id, keys in keymap.items():
        entry = f"{where}: keymap.{action_id} = {keys!r} is invalid"
        if action_id not in ids:
            raise ConfigError(f"{entry}: no action has this id (the ids: {', '.join(ids)})")
        if not all(_split(keys)):
            raise ConfigError(f"{entry}: an empty key (keys are comma-separated, e.g. 'f5,ctrl+r')")
        for key in _split(keys):
            *mods, name = key.split("+")
            if name not in names or not set(mods) <= _MODIFIERS:
                raise ConfigError(
                    f"{entry}: unknown key {key!r} (keys look like ctrl+s, f5, escape, shift+up)"
                )
    bound = [(action.id, set(_split(keymap.get(action.id, action.keys)))) for action in ALL_ACTIONS]
    for index, (first, first_keys) in enumerate(bound):
        for second, second_keys in bound[index + 1 :]:
            taken = first_keys & second_keys
            if taken and (first in keymap or second in keymap):
                named = first if first in keymap else second
                raise ConfigError(
                    f"{where}: keymap.{named} = {keymap[named]!r} is invalid: "
                    f"{', '.join(sorted(taken))} would be both {first} and {second}"
                )
