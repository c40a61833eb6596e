"""Message widgets: user messages and assistant replies (thinking, answer, stats line)."""

from __future__ import annotations

import asyncio
from typing import Final

from markdown_it import MarkdownIt
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import Widget
from textual.widgets import Collapsible, Label, Markdown, Static
from textual.widgets.markdown import MarkdownFence, MarkdownStream

from app.core.chat import Role
from app.storage import StoredMessage
from app.textsafe import visible
from app.ui.format import stats_line

THINKING: Final = "Thinking…"


def code_blocks(markdown: str) -> list[tuple[str, str]]:
    """The fenced and indented code blocks of a Markdown text, as (language, code)."""
    tokens = MarkdownIt("gfm-like").parse(markdown)
    return [
        (token.info.strip(), token.content.rstrip("\n"))
        for token in tokens
        if token.type in ("fence", "code_block")
    ]


class UserMessage(Static):
    """What the user wrote, shown verbatim."""

    def __init__(self, content: str, message_id: int) -> None:
        super().__init__(visible(content), markup=False, classes="user")
        self.message_id = message_id
        self.border_title = "You"


class ReplyView(Vertical, can_focus=True):
    """One assistant reply: thinking in a collapsible block, the answer as Markdown, stats.

    A streaming reply grows through `write` (fed by `ReplyController` at a paced rate)
    and ends with `finish`; a stored one is built complete by `from_stored`.
    """

    def __init__(
        self,
        *,
        answer: str = "",
        reasoning: str = "",
        footer: str = "",
        message_id: int | None = None,
        streaming: bool = False,
    ) -> None:
        super().__init__(classes="reply")
        self.message_id = message_id
        self.answer = answer
        self.reasoning = reasoning
        self._footer = footer
        self._streaming = streaming
        self._streams: dict[str, MarkdownStream] = {}
        self.border_title = "Ling"

    @classmethod
    def from_stored(cls, message: StoredMessage) -> ReplyView:
        """A finished reply as stored."""
        return cls(
            answer=message.content,
            reasoning=message.reasoning,
            footer=stats_line(message.status, message.stats, message.error or message.cut_reason),
            message_id=message.id,
        )

    def compose(self) -> ComposeResult:
        title = THINKING if self._streaming else _thinking_title(self.reasoning)
        with Collapsible(title=title, collapsed=not self._streaming):
            yield Markdown(visible(self.reasoning), classes="reasoning")
        yield Markdown(visible(self.answer), classes="answer")
        yield Label(visible(self._footer) or "…", classes="reply-footer", markup=False)

    def on_mount(self) -> None:
        self.thinking.display = bool(self.reasoning)

    @property
    def thinking(self) -> Collapsible:
        """The collapsible thinking block."""
        return self.query_one(Collapsible)

    async def write(self, answer: str, reasoning: str) -> None:
        """Append streamed text; the thinking block folds away once the answer begins."""
        if not answer and not reasoning:
            return
        if reasoning:
            self.reasoning += reasoning
            self.thinking.display = True
            await self._stream("reasoning").write(visible(reasoning))
        if answer:
            if not self.answer and self.reasoning:
                self.thinking.collapsed = True
            self.answer += answer
            await self._stream("answer").write(visible(answer))

    async def finish(self, footer: str) -> None:
        """Flush the streams and show the final stats line."""
        while self._streams:  # a write racing this one may open a stream meanwhile
            part, stream = self._streams.popitem()
            if not await _stopped(stream):  # its text may be unshown: show it whole
                text = self.answer if part == "answer" else self.reasoning
                await self.query_one(f".{part}", Markdown).update(visible(text))
        self._streaming = False
        self.thinking.title = _thinking_title(self.reasoning)
        self.set_footer(footer)

    def resume(self) -> None:
        """Stream again into this finished reply (it is being continued)."""
        self._streaming = True
        if self.reasoning and not self.answer:
            self.thinking.title = THINKING
        self.set_footer("…")

    def _stream(self, part: str) -> MarkdownStream:
        """The stream into the `part` Markdown, created on its first text."""
        if part not in self._streams:
            self._streams[part] = Markdown.get_stream(self.query_one(f".{part}", Markdown))
        return self._streams[part]

    def set_footer(self, footer: str) -> None:
        """Replace the line under the reply."""
        self.query_one(".reply-footer", Label).update(visible(footer))

    def on_click(self, event: events.Click) -> None:
        """Clicking a code block copies it."""
        node: Widget | None = event.widget
        while node is not None and node is not self:
            if isinstance(node, MarkdownFence):
                self.app.copy_to_clipboard(node.code)
                self.notify(f"Copied code block ({len(node.code.splitlines())} lines)")
                return
            parent = node.parent
            node = parent if isinstance(parent, Widget) else None


def _thinking_title(reasoning: str) -> str:
    return f"Thinking · {len(reasoning.split()):,} words"


def message_widget(message: StoredMessage) -> Widget | None:
    """The transcript widget of a stored message (system messages are not shown)."""
    if message.role is Role.USER:
        return UserMessage(message.content, message.id)
    if message.role is Role.ASSISTANT:
        return ReplyView.from_stored(message)
    return None


async def _stopped(stream: MarkdownStream) -> bool:
    """Stop `stream`; False when its task had not started (its text not all shown).

    Textual's `MarkdownStream.stop` cancels the stream's task and awaits it: a task cancelled
    before its first step raises CancelledError into the awaiter, which here is the end of a
    reply (the reply would never end).
    """
    try:
        await stream.stop()
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # the reply itself is being cancelled
        return False
    return True
