"""Stored and streamed text never reaches the terminal with a control character in it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from textual import events
from textual.pilot import Pilot
from textual.widgets import TextArea

from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.storage import ChatStore, MessageStatus
from app.telemetry import ReplyStats
from app.ui import LingChatApp
from app.ui.screens.dialogs import ConfirmDialog, RenameDialog
from tests.support.clock import FakeClock
from tests.support.pilot import (
    SIZE,
    Notices,
    chat_screen,
    reply_done,
    screen_text,
    send,
    wait_until,
)
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

HOSTILE = "\x1b]0;PWNED\x07\x1b]52;c;cHduZWQ=\x07\x1b[2J\x1b[31m\x9b2J\x7f"
"""Title and clipboard (OSC 0, OSC 52), clear screen, colour, a C1 CSI, DEL."""
SHOWN = "␛]0;PWNED␇␛]52;c;cHduZWQ=␇␛[2J␛[31m␛[2J␡"


async def drawn_safely(pilot: Pilot[Any], *expected: str) -> None:
    """Wait until the screen shows each expected part; it then holds no control character."""
    app = pilot.app
    assert isinstance(app, LingChatApp)
    await wait_until(pilot, lambda: all(part in screen_text(app) for part in expected))
    text = screen_text(app)
    assert not any(char in text for char in "\x1b\x07\x7f\x9b"), repr(text)
    for part in expected:
        assert part in text, (part, text)


def _stored_hostile_chat(store: ChatStore) -> None:
    chat = store.create_conversation(f"T{HOSTILE}")
    store.add_user_message(chat.id, f"ask {HOSTILE}")
    writer = store.start_reply(chat.id)
    writer.append(answer=f"answer {HOSTILE}\n\n```sh\ncode {HOSTILE}\n```\n", reasoning="")
    stats = ReplyStats(9, 5, 0.1, 0.5, 0.1, 10.0)
    writer.finish(MessageStatus.ERROR, stats, error=f"E{HOSTILE}")


async def test_a_stored_chat_shows_its_escapes_as_visible_text(
    chat_app: LingChatApp, store: ChatStore
) -> None:
    _stored_hostile_chat(store)
    async with chat_app.run_test(size=(200, 50)) as pilot:
        screen = await chat_screen(pilot)
        await drawn_safely(pilot, f"ask {SHOWN[:20]}", f"code {SHOWN[:20]}", "T␛]0;PWNED")
        assert screen.sub_title == f"T{SHOWN}"


async def test_a_streamed_reply_shows_escapes_split_across_chunks_as_visible_text(
    chat_app: LingChatApp, backend: ScriptedBackendDouble
) -> None:
    backend.enqueue(answer_reply("```\ncode \x1b]0;PW", "NED\x07 \x9b2J\n```\nend \x1b[2J"))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, f"hi {HOSTILE}")
        await reply_done(pilot)
        await drawn_safely(pilot, "code ␛]0;PWNED␇ ␛[2J", "end ␛[2J", "hi ␛]0;PWNED")


async def test_notifications_and_dialogs_show_escapes_as_visible_text(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("x", error=f"server said {HOSTILE}"))
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        await send(pilot, f"Q{HOSTILE}")
        await reply_done(pilot)
        await drawn_safely(pilot, "error: server said")
        await pilot.press("f8")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ConfirmDialog))
        await drawn_safely(pilot, "Q␛]0;PWNED")
        await pilot.press("escape")
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, RenameDialog))
        await drawn_safely(pilot, "Q␛]0;PWNED")


async def test_a_proof_from_a_hostile_server_shows_escapes_as_visible_text(
    make_app: Callable[..., LingChatApp], clock: FakeClock
) -> None:
    report = ProofReport(
        "stack",
        lines=(ProofLine("humming", f"H{HOSTILE}", Verdict.PASS, f"detail {HOSTILE}"),),
    )
    backend = ScriptedBackendDouble(clock=clock, report=report)
    app = make_app(backend, proof_hold_s=30)
    async with app.run_test(size=SIZE) as pilot:
        await drawn_safely(pilot, "detail ␛]0;PWNED")


async def test_a_chat_with_damaged_rows_opens_with_placeholders(
    chat_app: LingChatApp, store: ChatStore
) -> None:
    _stored_hostile_chat(store)
    with sqlite3.connect(store.path) as db:
        db.execute("UPDATE conversations SET sampling = '{not json', created_at = 'no date'")
        db.execute("UPDATE messages SET status = 'weird' WHERE role = 'user'")
        db.execute("UPDATE measurements SET decode_tps = 1e999, ttft_s = 'soon', extra = 'x'")
    db.close()
    async with chat_app.run_test(size=(200, 50)) as pilot:
        screen = await chat_screen(pilot)
        await drawn_safely(pilot, f"ask {SHOWN[:20]}", "✗ error: E␛]0;PWNED")
        assert screen.conversation is not None
        assert "inf tok/s" not in screen_text(chat_app)


BIDI = "\u202e\u2066\u2069\u200f\u061c\u200b"
"""Right-to-left override, isolates, marks, a zero-width space: they reorder or hide text."""


async def test_bidi_controls_in_a_chat_reach_the_screen_as_code_points(
    chat_app: LingChatApp, store: ChatStore
) -> None:
    chat = store.create_conversation(f"evil{BIDI}txt.exe")
    store.add_user_message(chat.id, f"ask{BIDI}end")
    async with chat_app.run_test(size=(200, 50)) as pilot:
        await chat_screen(pilot)
        shown = "⟨U+202E⟩⟨U+2066⟩⟨U+2069⟩⟨U+200F⟩⟨U+061C⟩⟨U+200B⟩"
        await wait_until(pilot, lambda: f"ask{shown}end" in screen_text(chat_app))
        text = screen_text(chat_app)
        assert f"evil{shown[:20]}" in text  # the chat list, cut to its width
        assert not any(char in text for char in BIDI), repr(text)


PASTED = (
    "ls\x1b[31m red\x1b[0m\r\nrow\tcol \x1b]8;;http://x\x07link\x1b]8;;\x07"
    " \x9b2J \u202eevil\x0cend"
)
"""Coloured output, CRLF, a tab, an OSC 8 hyperlink, a C1 CSI, an RLO, a form feed."""


async def _paste_and_send(
    pilot: Pilot[Any], store: ChatStore, text: str, shown: str, *keys: str
) -> str:
    """Paste `text` into the prompt, wait for `shown` on a screen with no control character,
    press `keys` and send: the message stored."""
    screen = await chat_screen(pilot)
    screen.query_one("#prompt").focus()
    pilot.app.post_message(events.Paste(text))
    await drawn_safely(pilot, shown)
    await pilot.press(*keys, "ctrl+s")
    await reply_done(pilot)
    (chat,) = store.list_conversations()
    return store.messages(chat.id)[0].content


async def test_a_paste_shows_its_controls_made_visible_and_sends_them_as_pasted(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("ok"))
    async with chat_app.run_test(size=SIZE) as pilot:
        sent = await _paste_and_send(pilot, store, f"say {PASTED}", "say ls␛[31m red␛[0m")
    assert sent == f"say {PASTED}".replace("\r\n", "\n")
    assert backend.requests[-1][0][-1].content == sent


async def test_a_paste_edited_by_hand_is_sent_as_shown(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("ok"))
    async with chat_app.run_test(size=SIZE) as pilot:
        sent = await _paste_and_send(pilot, store, "a\x1b[2Jb", "a␛[2Jb", "backspace", "c")
    assert sent == "a␛[2Jc"


async def test_a_paste_past_the_message_limit_stays_in_the_prompt_with_a_notice(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    notices = Notices()
    huge = "word " * ((1 << 20) // 5 + 1)
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        screen = await chat_screen(pilot)
        prompt = screen.query_one("#prompt", TextArea)
        prompt.focus()
        chat_app.post_message(events.Paste(huge))
        await wait_until(pilot, lambda: len(prompt.text) == len(huge), timeout=30)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: any("over the limit" in n for n in notices.messages))
        assert prompt.text == huge
    assert store.list_conversations() == []
    assert backend.requests == []
