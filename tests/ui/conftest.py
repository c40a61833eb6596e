"""Fixtures for the UI tests: a fake clock, the scripted backend double, a real store."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import TextArea

from app.chat import Sampling
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from tests.ui.scripted_backend import FakeClock, ScriptedBackendDouble

SIZE = (120, 40)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(clock: FakeClock) -> ScriptedBackendDouble:
    return ScriptedBackendDouble(clock=clock)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChatStore]:
    """The app's store; a locked file fails its writes after 0.2 s."""
    with ChatStore.open(db_path, busy_timeout_s=0.2) as opened:
        yield opened


@pytest.fixture
def make_app(store: ChatStore, clock: FakeClock) -> Callable[..., LingChatApp]:
    """Build the app around a backend; start-up does not pause on the proof."""

    def make(backend: ScriptedBackendDouble, **options: Any) -> LingChatApp:
        options = {"sampling": Sampling(), "clock": clock, "proof_hold_s": 0, **options}
        return LingChatApp(backend, store, **options)

    return make


@pytest.fixture
def chat_app(make_app: Callable[..., LingChatApp], backend: ScriptedBackendDouble) -> LingChatApp:
    return make_app(backend)


async def wait_until(
    pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 5
) -> None:
    """Let the app run until `predicate()` is true (fails the test after `timeout` s)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.01)


async def chat_screen(pilot: Pilot[Any]) -> ChatScreen:
    """Wait for start-up to finish; the chat screen."""
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen))
    screen = pilot.app.screen
    assert isinstance(screen, ChatScreen)
    await pilot.pause()
    return screen


async def send(pilot: Pilot[Any], text: str, key: str = "ctrl+s") -> None:
    """Put `text` in the prompt and press the send key."""
    screen = pilot.app.screen
    assert isinstance(screen, ChatScreen)
    await wait_until(pilot, lambda: screen.query("#prompt"))  # a new screen may not be composed
    prompt = screen.query_one("#prompt", TextArea)
    prompt.focus()
    prompt.load_text(text)
    await pilot.press(key)
    await wait_until(pilot, lambda: not prompt.text)


async def reply_done(pilot: Pilot[Any]) -> ChatScreen:
    """Wait until no reply streams any more."""
    screen = pilot.app.screen
    assert isinstance(screen, ChatScreen)
    await wait_until(pilot, lambda: screen.run is None)
    await pilot.pause()
    return screen


def text_of(widget: Widget) -> str:
    """The plain text a Static or Label shows."""
    return str(widget.content)  # type: ignore[attr-defined]


def notices(app: App[Any]) -> list[str]:
    """The messages of the notifications the app shows now."""
    return [notification.message for notification in app._notifications]
