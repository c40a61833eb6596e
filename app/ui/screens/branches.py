"""The open conversation's path on screen (`app.storage.tree`): `PathView` shows it in the
transcript, `BranchActions` moves through it.

Each message with alternatives (regenerated replies, edited messages) shows its place among
them in its title, e.g. `Ling · 2/3`, and at its bottom (`‹ 2/3 ›`). One message is the one
the keys act on: the last one, unless Alt+Up and Alt+Down selected another (marked).
Alt+Left and Alt+Right switch the alternative of the selected message, or, when it has none,
of the nearest one above it that has: the branch it is in; the path below then follows that
alternative's own choices.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final

from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TextArea

from app.core.chat import Role
from app.storage import ChatStore, Conversation, StoredMessage
from app.storage.tree import alternatives, path, places
from app.ui.chat_context import ChatContext
from app.ui.screens.exchange_edit import ExchangeEdit
from app.ui.screens.store_errors import storage_errors_noticed
from app.ui.widgets.messages import ReplyView, UserMessage, message_widget
from app.ui.widgets.transcript import Transcript

SELECTED: Final = "selected"
"""The CSS class of the message the keys act on, once Alt+Up or Alt+Down picked it."""


class PathView:
    """Shows a conversation's path on screen, and which message the keys act on."""

    def __init__(self, store: ChatStore) -> None:
        self._store = store
        self.selected: int | None = None
        """The message picked with Alt+Up/Down; None: the last one."""
        self._places: dict[int, tuple[int, int]] = {}
        """Each message's place among its alternatives, as last read (`tree.places`)."""

    async def show(
        self,
        transcript: Transcript,
        conversation_id: int,
        *,
        until: int | None = None,
        found: int | None = None,
    ) -> bool:
        """Show the path on screen (up to message `until`), each message titled with its
        place; scroll to `found` (marked), else to the selected message, else to the end.
        False when there is nothing to show."""
        every = self._store.all_messages(conversation_id)
        shown = path(every)
        ids = [message.id for message in shown]
        if until in ids:
            shown = shown[: ids.index(until) + 1]
        widgets = [w for m in shown if (w := message_widget(m))]
        if not widgets:
            return False
        self._places = places(every)
        self.relabel(widgets)
        at = [w for w in widgets if getattr(w, "message_id", None) == found]
        await transcript.show(widgets, at[0] if at else None)
        if found is None:
            self._mark(transcript, scroll=True)
        return True

    def retitle(self, transcript: Transcript, conversation_id: int) -> None:
        """Title the transcript's messages with their places read again (a reply was added)."""
        self._places = places(self._store.all_messages(conversation_id))
        self.relabel(_messages(transcript))

    def relabel(self, widgets: Sequence[Widget]) -> None:
        """Title each message widget with its speaker and, among alternatives, its place,
        at its top (`Ling · 2/3`) and its bottom (`‹ 2/3 ›`: in view while a long reply
        ends on screen)."""
        for widget in widgets:
            message_id = getattr(widget, "message_id", None) or 0
            position, count = self._places.get(message_id, (1, 1))
            place = f"{position}/{count}" if count > 1 else ""
            speaker = "You" if isinstance(widget, UserMessage) else "Ling"
            widget.border_title = f"{speaker} · {place}" if place else speaker
            widget.border_subtitle = f"‹ {place} ›" if place else ""

    def target(self, conversation_id: int) -> StoredMessage | None:
        """The message the keys act on: the selected one while it is on the path on screen,
        else the last; None without messages."""
        shown = self._store.messages(conversation_id)
        chosen = [message for message in shown if message.id == self.selected]
        return chosen[0] if chosen else (shown[-1] if shown else None)

    def exchange(self, conversation_id: int) -> list[StoredMessage]:
        """The user message the keys act on (the target, or the one the target answers) and
        every message after it on screen; empty when there is none."""
        shown = self._store.messages(conversation_id)
        target = self.target(conversation_id)
        at = shown.index(target) if target is not None else 0
        while at > 0 and shown[at].role is not Role.USER:
            at -= 1
        return shown[at:] if shown and shown[at].role is Role.USER else []

    def select(self, transcript: Transcript, step: int) -> None:
        """Move the selection `step` messages up (-1) or down (+1), staying on screen."""
        ids = [w.message_id for w in _messages(transcript)]
        if not ids:
            return
        at = ids.index(self.selected) if self.selected in ids else len(ids) - 1
        self.selected = ids[max(0, min(len(ids) - 1, at + step))]
        self._mark(transcript, scroll=True)

    async def switch(self, transcript: Transcript, conversation_id: int, step: int) -> str | None:
        """Show the previous (-1) or next (+1) alternative of the selected message or of its
        branch; a one-line notice when there is none that way."""
        every = self._store.all_messages(conversation_id)
        shown = path(every)
        target = self.target(conversation_id)
        above = shown[: shown.index(target) + 1] if target in shown else shown
        where = places(every)
        branching = [m for m in reversed(above) if where[m.id][1] > 1]
        if not branching:
            return "No alternatives here yet: regenerate a reply or edit a message to make one."
        siblings = [m.id for m in alternatives(every, branching[0].id)]
        at = siblings.index(branching[0].id) + step
        if not 0 <= at < len(siblings):
            return f"{siblings.index(branching[0].id) + 1}/{len(siblings)} is the " + (
                "first" if step < 0 else "last"
            )
        self._store.choose(siblings[at])
        self.selected = siblings[at]
        await self.show(transcript, conversation_id)
        return None

    def _mark(self, transcript: Transcript, *, scroll: bool) -> None:
        for widget in _messages(transcript):
            picked = widget.message_id == self.selected
            widget.set_class(picked, SELECTED)
            if picked and scroll:
                transcript.anchor(False)
                transcript.scroll_to_widget(widget, animate=False)


class BranchActions:
    """Regenerating, continuing and editing on `screen` into alternatives and branches of the
    open chat (`conversation`), moving through them and selecting a message.

    `generate` streams a new reply to a message, or continues a reply in place; `busy` says
    whether a reply streams (and then says so); `keys` gives an action's keys, as remapped.
    """

    def __init__(
        self,
        screen: Screen[None],
        context: ChatContext,
        *,
        conversation: Callable[[], Conversation | None],
        generate: Callable[[Conversation, int, StoredMessage | None], Awaitable[None]],
        busy: Callable[[], bool],
        keys: Callable[[str], str],
    ) -> None:
        self._screen = screen
        self._ctx = context
        self._conversation = conversation
        self._generate = generate
        self._busy = busy
        self._keys = keys
        self.path = PathView(context.store)
        self.edit: ExchangeEdit | None = None
        """The edit in progress (F4)."""

    @property
    def _transcript(self) -> Transcript:
        return self._screen.query_one(Transcript)

    @property
    def _prompt(self) -> TextArea:
        return self._screen.query_one("#prompt", TextArea)

    async def regenerate(self) -> None:
        """A new reply in place of the selected one (or to the selected message); the old
        one is kept as an alternative."""
        conversation = self._conversation()
        if conversation is None or self._busy():
            return
        self.cancel_edit()
        with storage_errors_noticed(self._screen):
            taken = self.path.exchange(conversation.id)
            if not taken:
                self._screen.notify("There is no reply to regenerate.")
                return
            target = taken[0]
            self._ctx.store.check_writable()  # a locked history fails before the screen changes
            self.path.selected = None
            await self.path.show(self._transcript, conversation.id, until=target.id)
            await self._generate(conversation, target.id, None)

    async def continue_reply(self) -> None:
        """Continue the last reply, cut off or stopped, in place: one reply, its text and
        figures extended."""
        conversation = self._conversation()
        if self._busy():
            return
        self.cancel_edit()
        with storage_errors_noticed(self._screen):
            messages = self._ctx.store.messages(conversation.id) if conversation else []
            last = messages[-1] if messages else None
            if conversation is None or last is None or not last.continuable:
                self._screen.notify("There is no cut-off or stopped reply to continue.")
                return
            assert last.parent_id is not None  # a reply answers a message
            await self._generate(conversation, last.parent_id, last)

    def edit_message(self) -> None:
        """Put the selected message (the last by default) in the prompt to edit; sent, it
        starts a new branch, and the old one is kept."""
        conversation = self._conversation()
        if conversation is None or self._busy() or self.edit is not None:
            return
        with storage_errors_noticed(self._screen):
            taken = self.path.exchange(conversation.id)
            hint = f"editing · {self._keys('send')}: send as a new branch · " + (
                f"{self._keys('stop_reply')}: cancel"
            )
            self.edit = ExchangeEdit.begin(taken, self._prompt, self._transcript, hint)
            if self.edit is None:
                self._screen.notify("There is no message to edit.")

    def cancel_edit(self) -> bool:
        """End the edit in progress unsent (the exchange stays); False when there was none."""
        edit, self.edit = self.edit, None
        if edit is not None:
            edit.cancel(self._prompt, self._transcript)
            self.path.relabel(edit.widgets(self._transcript))
        return edit is not None

    async def switch(self, step: int) -> None:
        """Show the previous (-1) or next (+1) alternative of the selected message, or of
        its branch."""
        conversation = self._conversation()
        if conversation is None or self._busy():
            return
        self.cancel_edit()
        with storage_errors_noticed(self._screen):
            if notice := await self.path.switch(self._transcript, conversation.id, step):
                self._screen.notify(notice)

    def select(self, step: int) -> None:
        """Select the message above (-1) or below (+1): the one F4, Ctrl+R and
        Alt+Left/Right act on."""
        self.path.select(self._transcript, step)


def _messages(transcript: Widget) -> list[UserMessage | ReplyView]:
    """The transcript's stored messages, top to bottom."""
    return [
        w
        for w in transcript.children
        if isinstance(w, UserMessage | ReplyView) and w.message_id is not None
    ]
