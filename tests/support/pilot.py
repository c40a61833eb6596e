"""Steps that drive the app through Textual's Pilot, and the notifications it posts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.message import Message
from textual.notifications import Notify
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import TextArea

from app.ui.screens.chat import ChatScreen
from tests.support.timeouts import Deadline

SIZE = (120, 40)


async def wait_until(
    pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 5
) -> None:
    """Let the app run until `predicate()` is true (fails the test after a
    `Deadline(timeout)`: scaled, and not eaten by other processes' CPU time)."""
    deadline = Deadline(timeout)
    while not predicate():
        if deadline.passed():
            raise AssertionError(f"timed out waiting for the app ({deadline.seconds:g} s)")
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


def screen_text(app: App[Any]) -> str:
    """The text of every cell the screen would draw now, without the app's own styling."""
    update = app.screen._compositor.render_update(full=True)
    return "\n".join("".join(segment.text for segment in strip) for strip in update.strips)


def text_of(widget: Widget) -> str:
    """The plain text a Static or Label shows."""
    return str(widget.content)  # type: ignore[attr-defined]


class Notices:
    """A `run_test(message_hook=...)` that keeps the text of each notification the app posts."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def __call__(self, message: Message) -> None:
        if isinstance(message, Notify):
            self.messages.append(message.notification.message)
