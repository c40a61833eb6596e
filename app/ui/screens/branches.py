"""The open conversation's path on screen (`app.storage.tree`): `PathView` shows it in the
transcript, `BranchActionsScreen` moves through it.

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

from textual.widget import Widget
from textual.widgets import TextArea

from app.core.chat import Role
from app.storage import ChatStore, Conversation, StoredMessage
from app.storage.tree import alternatives, path, places
from app.ui.screens.exchange_edit import ExchangeEdit
from app.ui.screens.report_actions import ReportActionsScreen
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


class BranchActionsScreen(ReportActionsScreen):
    """The base of the chat screen: regenerating, continuing and editing into alternatives
    and branches, moving through them and selecting a message."""

    conversation: Conversation | None
    _path: PathView
    _edit: ExchangeEdit | None
    """The edit in progress (F4)."""
    _busy: Callable[[], bool]
    """Whether a reply streams (then it says so)."""
    _keys: Callable[[str], str]
    """The keys of an action, as remapped."""
    _generate: Callable[[Conversation, int, StoredMessage | None], Awaitable[None]]
    """Stream a new reply to a message, or continue a reply in place."""

    async def action_regenerate(self) -> None:
        """A new reply in place of the selected one (or to the selected message); the old
        one is kept as an alternative."""
        conversation = self.conversation
        if conversation is None or self._busy():
            return
        self._cancel_edit()
        with self._storage_errors_reported():
            taken = self._path.exchange(conversation.id)
            if not taken:
                self.notify("There is no reply to regenerate.")
                return
            target = taken[0]
            self._ctx.store.check_writable()  # a locked history fails before the screen changes
            self._path.selected = None
            await self._path.show(self.query_one(Transcript), conversation.id, until=target.id)
            await self._generate(conversation, target.id, None)

    async def action_continue_reply(self) -> None:
        """Continue the last reply, cut off or stopped, in place: one reply, its text and
        figures extended."""
        conversation = self.conversation
        if self._busy():
            return
        self._cancel_edit()
        with self._storage_errors_reported():
            messages = self._ctx.store.messages(conversation.id) if conversation else []
            last = messages[-1] if messages else None
            if conversation is None or last is None or not last.continuable:
                self.notify("There is no cut-off or stopped reply to continue.")
                return
            assert last.parent_id is not None  # a reply answers a message
            await self._generate(conversation, last.parent_id, last)

    def action_edit_message(self) -> None:
        """Put the selected message (the last by default) in the prompt to edit; sent, it
        starts a new branch, and the old one is kept."""
        conversation = self.conversation
        if conversation is None or self._busy() or self._edit is not None:
            return
        prompt = self.query_one("#prompt", TextArea)
        with self._storage_errors_reported():
            taken = self._path.exchange(conversation.id)
            hint = f"editing · {self._keys('send')}: send as a new branch · " + (
                f"{self._keys('stop_reply')}: cancel"
            )
            self._edit = ExchangeEdit.begin(taken, prompt, self.query_one(Transcript), hint)
            if self._edit is None:
                self.notify("There is no message to edit.")

    def _cancel_edit(self) -> bool:
        """End the edit in progress unsent (the exchange stays); False when there was none."""
        edit, self._edit = self._edit, None
        if edit is not None:
            edit.cancel(self.query_one("#prompt", TextArea), self.query_one(Transcript))
            self._path.relabel(edit.widgets(self.query_one(Transcript)))
        return edit is not None

    async def action_previous_alternative(self) -> None:
        """Show the previous alternative of the selected message, or of its branch."""
        await self._switch(-1)

    async def action_next_alternative(self) -> None:
        """Show the next alternative of the selected message, or of its branch."""
        await self._switch(+1)

    async def _switch(self, step: int) -> None:
        conversation = self.conversation
        if conversation is None or self._busy():
            return
        self._cancel_edit()
        with self._storage_errors_reported():
            transcript = self.query_one(Transcript)
            if notice := await self._path.switch(transcript, conversation.id, step):
                self.notify(notice)

    def action_select_previous(self) -> None:
        """Select the message above: the one F4, Ctrl+R and Alt+Left/Right act on."""
        self._path.select(self.query_one(Transcript), -1)

    def action_select_next(self) -> None:
        """Select the message below."""
        self._path.select(self.query_one(Transcript), +1)


def _messages(transcript: Widget) -> list[UserMessage | ReplyView]:
    """The transcript's stored messages, top to bottom."""
    return [
        w
        for w in transcript.children
        if isinstance(w, UserMessage | ReplyView) and w.message_id is not None
    ]
