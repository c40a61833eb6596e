"""Up/Down recall of earlier prompts, Ctrl+L export of the open chat and Ctrl+E without an
editor, under Pilot on a real history file, at 80x24 and 100x30."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input, Label, TextArea

from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import ConfirmDialog
from app.ui.screens.file_dialogs import ExportDialog
from tests.support.pilot import Notices, chat_screen, reply_done, send, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

MakeApp = Callable[..., LingChatApp]
SIZES = pytest.mark.parametrize("size", [(80, 24), (100, 30)])


async def two_exchanges(pilot: Pilot[None]) -> tuple[ChatScreen, TextArea]:
    screen = await chat_screen(pilot)
    for question in ("first question", "second question"):
        await send(pilot, question)
        await reply_done(pilot)
    return screen, screen.query_one("#prompt", TextArea)


def answered(*answers: str) -> ScriptedBackendDouble:
    backend = ScriptedBackendDouble()
    backend.enqueue(*(answer_reply(answer) for answer in answers))
    return backend


@SIZES
async def test_up_in_an_empty_prompt_recalls_earlier_prompts_and_down_goes_back(
    make_app: MakeApp, size: tuple[int, int]
) -> None:
    app = make_app(answered("one", "two"))
    notices = Notices()
    async with app.run_test(size=size, message_hook=notices) as pilot:
        _, prompt = await two_exchanges(pilot)
        prompt.focus()
        seen = []
        for key in ("up", "up", "up", "down", "down"):
            await pilot.press(key)
            seen.append(prompt.text)
        assert seen == [
            "second question",
            "first question",
            "first question",  # nothing earlier: it stays
            "second question",
            "",
        ]
        await pilot.press("up", "!", "up")  # typing ends the recall: Up moves the cursor
        assert prompt.text == "second question!"
        assert prompt.cursor_location == (0, 0)  # on the first line, Up goes to its start


async def test_up_in_a_prompt_with_text_moves_the_cursor_and_recalls_nothing(
    make_app: MakeApp,
) -> None:
    app = make_app(answered("one", "two"))
    async with app.run_test(size=(80, 24)) as pilot:
        _, prompt = await two_exchanges(pilot)
        prompt.load_text("line one\nline two")
        prompt.focus()
        prompt.move_cursor((1, 3))
        await pilot.press("up")
        assert (prompt.text, prompt.cursor_location) == ("line one\nline two", (0, 3))


async def export_to(pilot: Pilot[None], path: Path) -> None:
    await pilot.press("ctrl+l")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ExportDialog))
    pilot.app.screen.query_one("#export-path", Input).value = str(path)
    await pilot.press("enter")
    await pilot.pause()


@SIZES
async def test_ctrl_l_exports_the_open_chat_and_asks_before_replacing_a_file(
    make_app: MakeApp, tmp_path: Path, size: tuple[int, int]
) -> None:
    app = make_app(answered("one", "two", "three"))
    notices = Notices()
    async with app.run_test(size=size, message_hook=notices) as pilot:
        screen, _ = await two_exchanges(pilot)
        markdown, as_json = tmp_path / "chat.md", tmp_path / "chat.json"
        await export_to(pilot, markdown)
        await wait_until(pilot, markdown.exists)
        assert "second question" in markdown.read_text(encoding="utf-8")
        await export_to(pilot, as_json)
        await wait_until(pilot, as_json.exists)
        (chat,) = json.loads(as_json.read_text(encoding="utf-8"))["conversations"]
        assert [m["content"] for m in chat["messages"]] == [
            "first question",
            "one",
            "second question",
            "two",
        ]

        await send(pilot, "third question")
        await reply_done(pilot)
        await export_to(pilot, markdown)
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog))
        assert "third question" not in markdown.read_text(encoding="utf-8")
        pilot.app.screen.query_one("#yes", Button).press()
        await wait_until(pilot, lambda: "third" in markdown.read_text(encoding="utf-8"))
        assert pilot.app.screen is screen
    assert notices.messages.count(f"Exported this chat to {markdown}") == 2


async def test_an_export_through_a_symbolic_link_is_refused_in_one_line(
    make_app: MakeApp, tmp_path: Path
) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("keep me", encoding="utf-8")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    notices = Notices()
    app = make_app(answered("one", "two"))
    async with app.run_test(size=(80, 24), message_hook=notices) as pilot:
        await two_exchanges(pilot)
        await export_to(pilot, link)  # refused at once: no question to replace it
        await wait_until(pilot, lambda: "symbolic link" in " ".join(notices.messages))
    assert target.read_text(encoding="utf-8") == "keep me"
    assert notices.messages[-1] == (
        f"cannot write {link}: it is a symbolic link, and ling-chat never writes through one "
        "(name the file itself)"
    )


@SIZES
async def test_ctrl_e_without_an_editor_set_is_one_line_and_the_draft_stays(
    make_app: MakeApp, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    monkeypatch.delenv("VISUAL", raising=False)
    monkeypatch.delenv("EDITOR", raising=False)
    notices = Notices()
    app = make_app(ScriptedBackendDouble())
    async with app.run_test(size=size, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        prompt = screen.query_one("#prompt", TextArea)
        prompt.load_text("my draft")
        await pilot.press("ctrl+e")
        await wait_until(pilot, lambda: notices.messages)
        assert notices.messages == ["No editor: set $VISUAL or $EDITOR (e.g. EDITOR=nano)."]
        assert prompt.text == "my draft"


async def test_an_export_path_naming_no_format_is_refused_in_the_dialog(
    make_app: MakeApp, tmp_path: Path
) -> None:
    app = make_app(answered("one", "two"))
    async with app.run_test(size=(80, 24)) as pilot:
        await two_exchanges(pilot)
        await export_to(pilot, tmp_path / "chat.pdf")
        dialog = pilot.app.screen
        assert isinstance(dialog, ExportDialog)  # still open, saying why
        error = dialog.query_one("#export-error", Label)
        assert error.display
        assert (
            str(error.content) == "chat.pdf: name a file ending in .md, .json, .jsonl, .html, .csv"
        )
    assert not (tmp_path / "chat.pdf").exists()
