"""Ctrl+O under Pilot on a real history file: a file's text attached from a typed path or
the folder tree, shown with its name, size and token estimate before sending, refused in one
line when binary or over the room left (the draft and earlier attachments stay), removable,
and sent between delimiters with its name stored."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, DirectoryTree, Input, Static, TextArea
from textual.widgets.directory_tree import DirEntry
from textual.widgets.tree import TreeNode

from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.file_dialogs import AttachDialog
from tests.support.pilot import Notices, chat_screen, reply_done, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

MakeApp = Callable[..., LingChatApp]
SIZES = [(80, 24), (100, 30)]


async def attach(pilot: Pilot[None], screen: ChatScreen, path: Path) -> None:
    """Ctrl+O, type `path`, Enter."""
    await pilot.press("ctrl+o")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, AttachDialog))
    pilot.app.screen.query_one("#attach-path", Input).value = str(path)
    await pilot.pause()
    await pilot.press("enter")
    await wait_until(pilot, lambda: pilot.app.screen is screen)
    await pilot.pause()


def strip_text(screen: ChatScreen) -> str:
    strip = screen.query_one("#attached", Static)
    return text_of(strip) if strip.display else ""


@pytest.mark.parametrize("size", SIZES)
async def test_ctrl_o_attaches_a_file_shows_it_and_sends_its_text_with_its_name_stored(
    make_app: MakeApp, db_path: Path, tmp_path: Path, size: tuple[int, int]
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("line one\nline two\n", encoding="utf-8")
    binary = tmp_path / "photo.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    huge = tmp_path / "huge.txt"
    huge.write_text("word " * 30_000, encoding="utf-8")  # 150,000 characters: ~37,500 tokens
    backend = ScriptedBackendDouble()
    backend.enqueue(answer_reply("noted"))
    notices = Notices()
    app = make_app(backend)
    async with app.run_test(size=size, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        prompt = screen.query_one("#prompt", TextArea)
        prompt.load_text("summarize this")
        await attach(pilot, screen, notes)
        tokens = screen.composing.attached[0].tokens
        assert strip_text(screen) == f"📎 notes.md · 18 B · ≈{tokens} tokens (estimate)"

        await attach(pilot, screen, binary)
        await attach(pilot, screen, huge)
        assert notices.messages[-2:] == [
            f"cannot attach {binary}: it is a binary file (it holds NUL bytes)",
            notices.messages[-1],
        ]
        assert notices.messages[-1].startswith(f"cannot attach {huge}: about 37,5")
        assert "left in the model's context" in notices.messages[-1]
        assert prompt.text == "summarize this"
        assert [a.name for a in screen.composing.attached] == ["notes.md"]

        await pilot.press("ctrl+s")
        await reply_done(pilot)
        assert not screen.query_one("#attached", Static).display
        assert screen.composing.attached == ()
    sent = backend.requests[0][0][-1].content
    assert sent == (
        "summarize this\n\n--- file: notes.md ---\nline one\nline two\n"
        "--- end of file: notes.md ---"
    )
    with ChatStore.open(db_path) as store:
        (chat,) = store.list_conversations()
        question, _ = store.messages(chat.id)
    assert (question.content, question.attachments) == (sent, ("notes.md",))
    assert chat.title == "summarize this"


async def test_attached_files_can_be_removed_before_sending_and_the_draft_stays(
    make_app: MakeApp, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("text", encoding="utf-8")
    app = make_app(ScriptedBackendDouble())
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await chat_screen(pilot)
        screen.query_one("#prompt", TextArea).load_text("draft")
        await attach(pilot, screen, notes)
        assert "notes.md" in strip_text(screen)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, AttachDialog))
        dialog = pilot.app.screen
        assert "Attached: notes.md" in text_of(dialog.query_one("#attached-now"))
        dialog.query_one("#detach", Button).press()
        await wait_until(pilot, lambda: pilot.app.screen is screen)
        await pilot.pause()
        assert screen.composing.attached == ()
        assert strip_text(screen) == ""
        assert screen.query_one("#prompt", TextArea).text == "draft"


async def test_a_file_picked_in_the_folder_tree_is_attached(
    make_app: MakeApp, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "only.txt").write_text("picked", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    app = make_app(ScriptedBackendDouble())
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await chat_screen(pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, AttachDialog))
        tree = pilot.app.screen.query_one(DirectoryTree)

        def picked() -> list[TreeNode[DirEntry]]:
            return [n for n in tree.root.children if n.label.plain == "only.txt"]

        await wait_until(pilot, picked)
        tree.focus()
        (node,) = picked()
        tree.move_cursor(node)
        await pilot.press("enter")
        await wait_until(pilot, lambda: bool(screen.composing.attached))
        assert [a.text for a in screen.composing.attached] == ["picked"]
