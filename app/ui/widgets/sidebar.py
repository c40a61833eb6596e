"""The sidebar: a search box over the full-text index and the list of conversations."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from app.storage import Conversation, SearchHit
from app.textsafe import visible

_MATCH = re.compile(r"«(.*?)»")


def snippet_text(snippet: str) -> Text:
    """A search snippet with its «marked» matches highlighted."""
    text = Text(style="dim")
    snippet = visible(snippet)
    position = 0
    for match in _MATCH.finditer(snippet):
        text.append(snippet[position : match.start()])
        text.append(match.group(1), style="bold reverse")
        position = match.end()
    text.append(snippet[position:])
    return text


class Sidebar(Vertical):
    """Search box on top, conversations (or search hits) below."""

    @dataclass
    class Opened(Message):
        """The user picked a conversation, or a message found by search."""

        conversation_id: int
        message_id: int | None = None

    @dataclass
    class SearchChanged(Message):
        """The search text changed (empty: show the conversations again)."""

        query: str

    def compose(self) -> ComposeResult:
        yield Input(placeholder="Search all chats", id="search")
        yield OptionList(id="conversations")

    @property
    def search_query(self) -> str:
        """The text in the search box."""
        return self.query_one("#search", Input).value

    def focus_search(self) -> None:
        """Put the cursor in the search box."""
        self.query_one("#search", Input).focus()

    def show_conversations(
        self, conversations: Sequence[Conversation], current: int | None
    ) -> None:
        """List the conversations, newest first, highlighting `current`."""
        options = self.query_one("#conversations", OptionList)
        options.set_options(
            Option(Text(visible(c.title), no_wrap=True), id=f"c{c.id}") for c in conversations
        )
        if current is not None and any(c.id == current for c in conversations):
            options.highlighted = options.get_option_index(f"c{current}")

    def show_hits(self, hits: Sequence[SearchHit]) -> None:
        """List search hits: each opens its conversation at the message."""
        options = self.query_one("#conversations", OptionList)
        if not hits:
            options.set_options([Option(Text("No matches", style="dim"), disabled=True)])
            return
        options.set_options(
            Option(
                Text.assemble((visible(hit.title), "bold"), "\n", snippet_text(hit.snippet)),
                id=f"h{hit.conversation_id}:{hit.message_id}",
            )
            for hit in hits
        )

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.SearchChanged(event.value.strip()))

    @on(Input.Submitted, "#search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        options = self.query_one("#conversations", OptionList)
        if options.highlighted is None and options.option_count:
            options.highlighted = 0
        options.focus()

    @on(OptionList.OptionSelected, "#conversations")
    def _option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        option_id = event.option.id or ""
        if option_id.startswith("c"):
            self.post_message(self.Opened(int(option_id[1:])))
        elif option_id.startswith("h"):
            conversation, message = option_id[1:].split(":")
            self.post_message(self.Opened(int(conversation), int(message)))
