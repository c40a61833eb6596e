"""The chosen theme under Pilot, on a real theme file: remembered across a restart; a bad
file is one line naming it, the default theme is used and the file stays as it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from app.ui import LingChatApp
from tests.support.pilot import Notices, chat_screen, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble

MakeApp = Callable[..., LingChatApp]


async def test_the_theme_chosen_is_used_again_after_a_restart(
    make_app: MakeApp, tmp_path: Path
) -> None:
    prefs = tmp_path / "config"
    first = make_app(ScriptedBackendDouble(), prefs_dir=prefs)
    async with first.run_test(size=(80, 24)) as pilot:
        await chat_screen(pilot)
        default = first.theme
        first.theme = "nord"
        saved = prefs / "theme.json"
        await wait_until(pilot, lambda: saved.exists() and "nord" in saved.read_text())
    again = make_app(ScriptedBackendDouble(), prefs_dir=prefs)
    async with again.run_test(size=(100, 30)) as pilot:
        await chat_screen(pilot)
        assert (default, again.theme) == ("textual-dark", "nord")


async def test_a_bad_theme_file_is_one_line_and_stays_as_it_was(
    make_app: MakeApp, tmp_path: Path
) -> None:
    prefs = tmp_path / "config"
    prefs.mkdir()
    (prefs / "theme.json").write_text("nord", encoding="utf-8")
    notices = Notices()
    app = make_app(ScriptedBackendDouble(), prefs_dir=prefs)
    async with app.run_test(size=(80, 24), message_hook=notices) as pilot:
        await chat_screen(pilot)
        assert app.theme == "textual-dark"
    assert notices.messages[0].startswith(f"{prefs / 'theme.json'}: cannot read the theme (")
    assert (prefs / "theme.json").read_text(encoding="utf-8") == "nord"
