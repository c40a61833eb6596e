"""Presets under Pilot, on a real presets file and history: F3's "Save as preset…" makes
one (the default: every new chat starts with it, across a restart), the palette's "New chat
from preset…" picks one, and a bad presets file is one line that loses nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Button, Checkbox, Input, TextArea

from app.core.chat import Role, Sampling, Thinking
from app.prefs.presets import Preset, PresetFile, Presets
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import SettingsDialog
from app.ui.screens.preset_dialogs import PresetNameDialog, PresetPicker
from tests.support.pilot import Notices, chat_screen, reply_done, send, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

MakeApp = Callable[..., LingChatApp]
SIZES = pytest.mark.parametrize("size", [(80, 24), (100, 30)])


def answered(*answers: str) -> ScriptedBackendDouble:
    backend = ScriptedBackendDouble()
    backend.enqueue(*(answer_reply(answer) for answer in answers))
    return backend


def system_prompt_sent(backend: ScriptedBackendDouble, index: int = -1) -> str:
    messages = backend.requests[index][0]
    return messages[0].content if messages[0].role is Role.SYSTEM else ""


async def save_preset_from_f3(pilot: Pilot[None], prompt: str, name: str) -> None:
    """F3, a system prompt and temperature, "Save as preset…", `name` as the default."""
    await pilot.press("f3")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsDialog))
    dialog = pilot.app.screen
    dialog.query_one("#system-prompt", TextArea).load_text(prompt)
    dialog.query_one("#temperature", Input).value = "0.3"
    dialog.query_one("#save-preset", Button).press()
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, PresetNameDialog))
    naming = pilot.app.screen
    naming.query_one("#preset-default", Checkbox).value = True
    naming.query_one("#preset-name", Input).value = name
    naming.query_one("#preset-name", Input).focus()
    await pilot.press("enter")
    await wait_until(pilot, lambda: pilot.app.screen is dialog)
    await pilot.press("escape")  # the chat's own settings stay as they were
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen))


@SIZES
async def test_a_preset_saved_from_f3_as_the_default_starts_every_new_chat(
    make_app: MakeApp,
    tmp_path: Path,
    db_path: Path,
    size: tuple[int, int],
) -> None:
    prefs = tmp_path / "config"
    backend = answered("one", "two", "three")
    notices = Notices()
    app = make_app(backend, prefs_dir=prefs)
    async with app.run_test(size=size, message_hook=notices) as pilot:
        await chat_screen(pilot)
        await send(pilot, "before any preset")
        await reply_done(pilot)
        await save_preset_from_f3(pilot, "Answer like a pirate.", "pirate")
        assert notices.messages[-1] == (
            f"Preset “pirate” saved (the default for new chats) in {prefs / 'presets.json'}."
        )
        await send(pilot, "same chat")  # the open chat keeps its settings
        await reply_done(pilot)
        await pilot.press("ctrl+n")
        await send(pilot, "new chat")
        await reply_done(pilot)
    assert [system_prompt_sent(backend, i) for i in range(3)] == [
        "",
        "",
        "Answer like a pirate.",
    ]
    assert backend.requests[2][1].temperature == 0.3
    saved = PresetFile(prefs).load()
    assert saved.default == "pirate"
    assert saved.get("pirate") == Preset(
        "pirate", "Answer like a pirate.", Sampling(temperature=0.3), Thinking()
    )
    with ChatStore.open(db_path) as store:
        newest = store.list_conversations()[0]
    assert (newest.title, newest.system_prompt) == ("new chat", "Answer like a pirate.")


@SIZES
async def test_new_chat_from_preset_in_the_palette_picks_one(
    make_app: MakeApp, tmp_path: Path, size: tuple[int, int]
) -> None:
    prefs = tmp_path / "config"
    presets = Presets().saved(
        Preset("terse", "Be terse.", Sampling(top_k=5), Thinking()), default=False
    )
    PresetFile(prefs).save(
        presets.saved(Preset("poet", "Rhyme.", Sampling(), Thinking()), default=True)
    )
    backend = answered("one", "two")
    app = make_app(backend, prefs_dir=prefs)
    async with app.run_test(size=size) as pilot:
        await chat_screen(pilot)  # no chat yet: the new one has the default preset
        await send(pilot, "first")
        await reply_done(pilot)
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, CommandPalette))
        await pilot.press(*"from preset", "enter")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, PresetPicker))
        await pilot.press("up", "enter")  # the default (poet) is highlighted: terse is above
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen))
        await send(pilot, "second")
        await reply_done(pilot)
    assert [system_prompt_sent(backend, i) for i in range(2)] == ["Rhyme.", "Be terse."]
    assert backend.requests[1][1].top_k == 5


async def test_a_bad_presets_file_is_one_line_and_loses_nothing(
    make_app: MakeApp, tmp_path: Path
) -> None:
    prefs = tmp_path / "config"
    prefs.mkdir()
    path = prefs / "presets.json"
    path.write_text('{"presets": [{"name": "x", "oops": 1}]}', encoding="utf-8")
    backend = answered("one")
    notices = Notices()
    app = make_app(backend, prefs_dir=prefs)
    async with app.run_test(size=(80, 24), message_hook=notices) as pilot:
        await chat_screen(pilot)
        assert notices.messages[0].startswith(f"{path}: the presets do not read: ")
        await save_preset_from_f3_refused(pilot)
        await send(pilot, "still chatting")
        await reply_done(pilot)
    assert path.read_text(encoding="utf-8") == '{"presets": [{"name": "x", "oops": 1}]}'
    assert system_prompt_sent(backend) == ""


async def save_preset_from_f3_refused(pilot: Pilot[None]) -> None:
    await pilot.press("f3")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsDialog))
    pilot.app.screen.query_one("#save-preset", Button).press()
    await pilot.pause()
    assert isinstance(pilot.app.screen, SettingsDialog)  # no name asked: it could not be saved
    await pilot.press("escape")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen))
