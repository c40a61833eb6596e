"""Drive the real Textual app (Pilot) through a real backend on the GPU machine."""

from __future__ import annotations

import time
from pathlib import Path

from textual.widgets import Static

from app.backend.protocol import ChatBackend
from app.core.chat import Role, Sampling
from app.storage import ChatStore, MessageStatus, StoredMessage
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from tests.gpu import models
from tests.support.pilot import send, text_of, wait_until

MIN_ACCEPT = 3.5


def ended_replies(store: ChatStore) -> int:
    """Assistant messages no longer being written, over every conversation."""
    return sum(
        message.role is Role.ASSISTANT and message.status is not MessageStatus.PARTIAL
        for conversation in store.list_conversations()
        for message in store.messages(conversation.id)
    )


async def chat_through_app(
    backend: ChatBackend,
    db: Path,
    questions: tuple[str, ...],
    screenshot: Path,
    *,
    min_accept: float = MIN_ACCEPT,
    banner: str | None = None,
) -> list[StoredMessage]:
    """Start the app on `backend`, ask `questions` in turn, save a screenshot; the replies.

    Each reply must be the known answer, complete, with SGLang's accept length (at least
    `min_accept`) stored and shown in the speed panel. With `banner`, the app's banner must
    show that text after the last reply.
    """
    began = time.monotonic()

    def say(what: str) -> None:  # flushed: a run cut short still shows how far it got
        print(f"[{time.monotonic() - began:6.1f}s] {what}", flush=True)

    with ChatStore.open(db) as store:
        app = LingChatApp(backend, store, sampling=Sampling(temperature=0.0), proof_hold_s=0)
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                say("waiting for the backend and the proof")
                await wait_until(
                    pilot,
                    lambda: isinstance(app.screen, ChatScreen) or app.return_code is not None,
                    timeout=600,
                )
                screen = app.screen
                assert isinstance(screen, ChatScreen), (
                    f"the app exited at start-up ({app.return_code}): {app._exit_renderables}"
                )
                say("chat screen up")
                for asked, question in enumerate(questions, 1):
                    await send(pilot, question)
                    await wait_until(
                        pilot,
                        lambda asked=asked: screen.run is None and ended_replies(store) == asked,
                        timeout=120,
                    )
                    say(f"reply {asked} ended")
                numbers = screen.query_one("#reply-numbers", Static)
                # The panel draws the reply's final numbers on its next tick after the store
                # has the reply (on the H200 it still showed the live view when first read).
                await wait_until(
                    pilot, lambda: "accept" in text_of(numbers) and "verify" in text_of(numbers)
                )
                panel = text_of(numbers)
                say(f"speed panel after the last reply:\n{panel}")
                if banner is not None:
                    shown = screen.query_one("#banner", Static)
                    await wait_until(pilot, lambda: shown.display and banner in text_of(shown))
                    say(f"banner: {text_of(shown)}")
                app.save_screenshot(filename=screenshot.name, path=str(screenshot.parent))
        finally:  # a failed wait must not leave the backend running and the test hanging
            await app.close_backend()
        (conversation,) = store.list_conversations()
        replies = store.messages(conversation.id)[1::2]
    _, answer = models.expected_reply()
    for reply in replies:
        assert reply.status is MessageStatus.COMPLETE
        assert reply.content.strip() == answer.strip()
        assert reply.stats is not None and (reply.stats.accept_length or 0) >= min_accept
        print(
            f"stored reply: {reply.stats.completion_tokens} tokens, "
            f"{reply.stats.decode_tps:.1f} tok/s, TTFT {reply.stats.ttft_s:.3f} s, "
            f"accept {reply.stats.accept_length:.2f}"
        )
    return replies
