"""`PresetActionsScreen`: presets on the chat screen: saving F3's settings as one, the
default one for every new chat, and a new chat from a chosen one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from app.core.errors import ConfigError, ExportError
from app.prefs.presets import Preset, Presets
from app.ui.screens.composer_actions import ComposerActionsScreen
from app.ui.screens.dialogs import ChatSettings
from app.ui.screens.preset_dialogs import PresetName, PresetNameDialog, PresetPicker


def settings_of(preset: Preset) -> ChatSettings:
    """A preset as a chat's settings."""
    return ChatSettings(preset.system_prompt, preset.sampling, preset.thinking)


class PresetActionsScreen(ComposerActionsScreen):
    """The base of the chat screen: presets."""

    _draft: ChatSettings
    """The settings of the new chat, until it is stored."""
    _new_draft: Callable[[], Awaitable[None]]
    _busy: Callable[[], bool]

    def _presets(self) -> Presets | None:
        """The saved presets; None (after a one-line error) when the file does not read."""
        if self._ctx.presets is None:
            return Presets()
        try:
            return self._ctx.presets.load()
        except ConfigError as error:
            self.notify(str(error), severity="error")
            return None

    def new_chat_settings(self) -> ChatSettings:
        """A new chat's settings: the default preset's, else the config file's sampling."""
        presets = self._presets()
        preset = presets.get(presets.default) if presets else None
        return settings_of(preset) if preset else ChatSettings("", self._ctx.default_sampling)

    def save_preset(self, settings: ChatSettings) -> None:
        """Ask for a name, then save `settings` (from F3) as a preset."""
        presets = self._presets()
        if presets is not None:
            self.app.push_screen(
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
            self.notify(str(error), severity="error")
            return
        default = " (the default for new chats)" if named.default else ""
        self.notify(f"Preset “{named.name}” saved{default} in {file.path}.")

    def new_chat_from_preset(self) -> None:
        """Pick a preset, then start a new chat with it."""
        presets = self._presets()
        if presets is None:
            return
        if not presets.presets:
            self.notify("No presets yet: save one from the chat settings (F3).")
            return
        self.app.push_screen(PresetPicker(presets), self._preset_picked)

    async def _preset_picked(self, name: str | None) -> None:
        if name is None or self._busy():
            return
        presets = self._presets()
        preset = presets.get(name) if presets else None
        await self._new_draft()
        self._draft = (
            settings_of(preset) if preset else ChatSettings("", self._ctx.default_sampling)
        )
        self.notify(f"New chat with the preset “{name}”." if preset else "New chat.")
        self.composer.focus()
