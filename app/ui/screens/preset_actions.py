"""`PresetActions`: presets on the chat screen: saving F3's settings as one, the default one
for every new chat, and a new chat from a chosen one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from textual.screen import Screen

from app.core.errors import ConfigError, ExportError
from app.prefs.presets import Preset, Presets
from app.ui.chat_context import ChatContext
from app.ui.screens.dialogs import ChatSettings
from app.ui.screens.preset_dialogs import PresetName, PresetNameDialog, PresetPicker


def settings_of(preset: Preset) -> ChatSettings:
    """A preset as a chat's settings."""
    return ChatSettings(preset.system_prompt, preset.sampling, preset.thinking)


class PresetActions:
    """Presets on `screen`: `new_chat` starts a new chat with given settings, `busy` says
    whether a reply streams (and then says so)."""

    def __init__(
        self,
        screen: Screen[None],
        context: ChatContext,
        *,
        new_chat: Callable[[ChatSettings], Awaitable[None]],
        busy: Callable[[], bool],
    ) -> None:
        self._screen = screen
        self._ctx = context
        self._new_chat = new_chat
        self._busy = busy

    def _presets(self) -> Presets | None:
        """The saved presets; None (after a one-line error) when the file does not read."""
        if self._ctx.presets is None:
            return Presets()
        try:
            return self._ctx.presets.load()
        except ConfigError as error:
            self._screen.notify(str(error), severity="error")
            return None

    def new_chat_settings(self) -> ChatSettings:
        """A new chat's settings: the default preset's, else the config file's sampling."""
        presets = self._presets()
        preset = presets.get(presets.default) if presets else None
        return settings_of(preset) if preset else ChatSettings("", self._ctx.default_sampling)

    def save(self, settings: ChatSettings) -> None:
        """Ask for a name, then save `settings` (from F3) as a preset."""
        presets = self._presets()
        if presets is not None:
            self._screen.app.push_screen(
                PresetNameDialog(presets), lambda named: self._preset_named(settings, named)
            )

    def _preset_named(self, settings: ChatSettings, named: PresetName | None) -> None:
        file, presets = self._ctx.presets, self._presets()
        if named is None or file is None or presets is None:
            return
        preset = Preset(named.name, settings.system_prompt, settings.sampling, settings.thinking)
        try:
            file.save(presets.saved(preset, default=named.default))
        except (ConfigError, ExportError) as error:
            self._screen.notify(str(error), severity="error")
            return
        default = " (the default for new chats)" if named.default else ""
        self._screen.notify(f"Preset “{named.name}” saved{default} in {file.path}.")

    def pick_for_new_chat(self) -> None:
        """Pick a preset, then start a new chat with it."""
        presets = self._presets()
        if presets is None:
            return
        if not presets.presets:
            self._screen.notify("No presets yet: save one from the chat settings (F3).")
            return
        self._screen.app.push_screen(PresetPicker(presets), self._preset_picked)

    async def _preset_picked(self, name: str | None) -> None:
        if name is None or self._busy():
            return
        presets = self._presets()
        preset = presets.get(name) if presets else None
        await self._new_chat(
            settings_of(preset) if preset else ChatSettings("", self._ctx.default_sampling)
        )
        self._screen.notify(f"New chat with the preset “{name}”." if preset else "New chat.")
