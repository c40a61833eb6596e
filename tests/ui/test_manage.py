"""Managing chats: sidebar, new, rename, delete, search, per-chat settings, keys."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static, TextArea

from app.core.chat import Role, Sampling
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.screens.dialogs import (
    ConfirmDialog,
    HelpScreen,
    RenameDialog,
    ReportScreen,
    SettingsDialog,
)
from app.ui.widgets.messages import ReplyView
from tests.support.clock import FakeClock
from tests.support.pilot import SIZE, Notices, chat_screen, reply_done, send, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply
from tests.support.storage import write_locked

MakeApp = Callable[..., LingChatApp]


def sidebar_titles(app: LingChatApp) -> list[str]:
    options = app.screen.query_one("#conversations", OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_new_chat_is_stored_on_first_send_and_listed_newest_first(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("a"), answer_reply("b"))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, "first chat")
        await reply_done(pilot)
        await pilot.press("ctrl+n")
        await pilot.pause()
        assert len(store.list_conversations()) == 1
        await send(pilot, "second chat")
        await reply_done(pilot)
        assert sidebar_titles(chat_app) == ["second chat", "first chat"]


async def rename_to(pilot: Pilot[None], title: str) -> ChatScreen:
    """Send a first message, open the rename dialog and type `title`; the chat screen."""
    screen = await chat_screen(pilot)
    await send(pilot, "old")
    await reply_done(pilot)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, RenameDialog))
    pilot.app.screen.query_one("#title", Input).value = title
    return screen


async def test_rename_chat(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("a"))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await rename_to(pilot, "Cats")
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat_app.screen is screen)
        assert screen.sub_title == "Cats"
        assert sidebar_titles(chat_app) == ["Cats"]
    assert [c.title for c in store.list_conversations()] == ["Cats"]


async def test_renaming_on_a_locked_database_is_a_one_line_error_and_keeps_the_title(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, db_path: Path
) -> None:
    backend.enqueue(answer_reply("a"))
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await rename_to(pilot, "Cats")
        with write_locked(db_path):
            await pilot.press("enter")
            await wait_until(pilot, lambda: notices.messages)
        assert notices.messages[0].startswith(f"{db_path} is locked by another process")
        assert chat_app.screen is screen and screen.sub_title == "old"
    assert [c.title for c in store.list_conversations()] == ["old"]


async def test_delete_asks_first_and_cancel_keeps_the_chat(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("a"), answer_reply("b"))
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await send(pilot, "keep")
        await reply_done(pilot)
        await pilot.press("ctrl+n")
        await send(pilot, "drop")
        await reply_done(pilot)
        await pilot.press("f8")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, ConfirmDialog))
        await pilot.press("enter")  # focus starts on Cancel
        await wait_until(pilot, lambda: chat_app.screen is screen)
        assert len(store.list_conversations()) == 2
        await pilot.press("f8")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, ConfirmDialog))
        await pilot.click("#yes")
        await wait_until(pilot, lambda: len(store.list_conversations()) == 1)
        await pilot.pause()
        assert screen.sub_title == "keep"
        assert sidebar_titles(chat_app) == ["keep"]


async def test_search_finds_a_message_and_opens_its_chat(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    one = store.create_conversation("About whales")
    store.add_user_message(one.id, "tell me about the blue whale")
    other = store.create_conversation("Other")
    store.add_user_message(other.id, "unrelated")
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        assert screen.sub_title == "Other"
        await pilot.press("ctrl+f")
        screen.query_one("#search", Input).value = "whale"
        await wait_until(pilot, lambda: "blue" in "".join(sidebar_titles(chat_app)))
        assert sidebar_titles(chat_app)[0].startswith("About whales\ntell me about the blue")
        await pilot.press("enter", "enter")
        await wait_until(pilot, lambda: screen.sub_title == "About whales")
        assert screen.query(".found")


async def test_settings_dialog_sets_the_system_prompt_and_sampling(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("a"), answer_reply("b"))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, "hello")
        await reply_done(pilot)
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, SettingsDialog))
        dialog = chat_app.screen
        dialog.query_one("#system-prompt", TextArea).load_text("Answer in French.")
        dialog.query_one("#temperature", Input).value = "5"
        await pilot.click("#save")
        assert "out of range" in str(dialog.query_one("#settings-error").content)  # type: ignore[attr-defined]
        for raw in ("nan", "inf"):  # float() takes both, no range check rejects NaN
            dialog.query_one("#temperature", Input).value = raw
            await pilot.press("ctrl+s")
            error = str(dialog.query_one("#settings-error").content)  # type: ignore[attr-defined]
            assert error == f"Temperature (0–2): {raw!r} is not a number"
        dialog.query_one("#temperature", Input).value = "0.2"
        tokens = dialog.query_one("#max_new_tokens", Input)
        default_tokens, tokens.value = tokens.value, "9" * 400  # too large for a float
        await pilot.press("ctrl+s")
        error = str(dialog.query_one("#settings-error").content)  # type: ignore[attr-defined]
        assert error == f"Max new tokens: {'9' * 400} is out of range"
        tokens.value = default_tokens
        dialog.query_one("#temperature", Input).value = "0.2"
        dialog.query_one("#top_k", Input).value = "-1"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(chat_app.screen, SettingsDialog))
        await send(pilot, "again")
        await reply_done(pilot)
    (conversation,) = store.list_conversations()
    assert conversation.system_prompt == "Answer in French."
    assert conversation.sampling == Sampling(temperature=0.2, top_k=-1)
    messages, sampling = backend.requests[1]
    assert messages[0].role is Role.SYSTEM and messages[0].content == "Answer in French."
    assert [m.content for m in messages[1:]] == ["hello", "a", "again"]
    assert sampling == Sampling(temperature=0.2, top_k=-1)


async def test_keymap_remaps_an_action_and_help_lists_it(
    make_app: MakeApp, clock: FakeClock
) -> None:
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(answer_reply("ok"))
    app = make_app(backend, keymap={"send": "ctrl+o"})
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        await pilot.press(*"hi", "ctrl+s")
        await pilot.pause()
        assert not backend.requests
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: backend.requests)
        await reply_done(pilot)
        assert [view.answer for view in screen.query(ReplyView)] == ["ok"]
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        console = Console(width=100)
        with console.capture() as shown:
            console.print(app.screen.query_one("#keys", Static).content)
        rows = [line.split("  ") for line in shown.get().splitlines()]
        rows = [[cell.strip() for cell in row if cell.strip()] for row in rows]
        assert ["Ctrl+O", "Send", "send"] in rows
        assert ["Esc", "Stop reply", "stop_reply"] in rows


async def test_help_says_what_tab_does_in_the_prompt(chat_app: LingChatApp) -> None:
    """Tab indents in the prompt (`Composer`): the help says so, and how to move on."""
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, HelpScreen))
        hint = str(chat_app.screen.query_one(".dialog-hint", Static).content)
        assert "Tab indents" in hint and "Shift+Tab moves on" in hint


async def test_command_palette_lists_every_chat_action(chat_app: LingChatApp) -> None:
    async with chat_app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        titles = {command.title for command in chat_app.get_system_commands(screen)}
        assert {
            "Send",
            "Stop reply",
            "Regenerate reply (old one kept)",
            "Delete chat",
            "Quit",
        } <= titles
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, CommandPalette))
        await pilot.press(*"proof", "enter")
        await wait_until(pilot, lambda: type(chat_app.screen).__name__ == "ReportScreen")


async def test_speed_by_context_shows_the_replies_measured_so_far(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply("a"), answer_reply("b"))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        for question in ("first", "second"):
            await send(pilot, question)
            await reply_done(pilot)
        await pilot.press("f7")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, ReportScreen))
        shown = str(chat_app.screen.query_one(Static).content).splitlines()
        assert shown[0] == "Speed by context length (prompt tokens)"
        assert shown[2].endswith(": 2 replies")  # model · profile · kind of this run
        assert shown[4].split()[:2] == ["<1K", "2"]
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(chat_app.screen, ChatScreen))
