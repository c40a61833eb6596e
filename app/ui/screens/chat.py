"""The chat screen: sidebar, transcript, prompt and speed panel, and the chat's actions."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from functools import partial

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Static, TextArea

from app.core.chat import Role
from app.core.errors import StorageError
from app.storage import Conversation, MessageStatus
from app.telemetry import ReplyStats
from app.telemetry.health import check_collapse
from app.telemetry.session import summarize_session
from app.textsafe import visible
from app.ui.bindings import CHAT_ACTIONS, action_by_id, keys_for
from app.ui.chat_context import ChatContext
from app.ui.format import title_from
from app.ui.reply import ReplyRequest, ReplyRun, request_messages
from app.ui.reply_controller import ReplyController
from app.ui.screens.dialogs import (
    ChatSettings,
    ConfirmDialog,
    RenameDialog,
    SettingsDialog,
)
from app.ui.screens.exchange_edit import ExchangeEdit
from app.ui.screens.report_actions import ReportActionsScreen
from app.ui.widgets.banner import Banner
from app.ui.widgets.composer import Composer
from app.ui.widgets.messages import UserMessage, message_widget
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel
from app.ui.widgets.speed_strip import SpeedStrip
from app.ui.widgets.transcript import Transcript


class ChatScreen(ReportActionsScreen):
    """One conversation at a time, with its reply streaming into the transcript."""

    # Help comes first (the app's priority binding takes its place) so that the footer
    # keeps it when the terminal is too narrow for every key.
    BINDINGS = [
        replace(action_by_id("help"), action="app.help", priority=False).binding(),
        *(action.binding() for action in CHAT_ACTIONS),
    ]

    def __init__(self, context: ChatContext) -> None:
        super().__init__()
        self._ctx = context
        self.conversation: Conversation | None = None
        """The open conversation; None for a new chat not stored yet."""
        self._draft = ChatSettings("", context.default_sampling)
        self.session_stats: list[ReplyStats] = []
        """Measurements of this session's completed replies, oldest first."""
        self._replies = ReplyController(context.backend, self, refresh_s=1 / context.refresh_hz)
        self._edit: ExchangeEdit | None = None
        """The edit and resend in progress (F4)."""

    def validate_sub_title(self, sub_title: object) -> str | None:
        """The header shows a chat's title with its control characters made visible."""
        return None if sub_title is None else visible(str(sub_title))

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield Sidebar(id="sidebar")
            with Vertical(id="chat"):
                yield Banner(self._ctx.proof, self._keys("show_proof"), id="banner")
                yield Transcript(id="transcript")
                yield SpeedStrip(self._keys("toggle_speed"), id="speed-strip")
                yield Composer(id="prompt", placeholder="Ask Ling anything…")
            yield SpeedPanel(id="speed")
        yield Footer()

    def _keys(self, action_id: str) -> str:
        """The keys of a chat action, as remapped by the keymap."""
        return keys_for(action_by_id(action_id), self._ctx.keymap)

    async def on_mount(self) -> None:
        prompt = self.query_one("#prompt", Composer)
        keys = f"{self._keys('send')}: send · {self._keys('stop_reply')}: stop"
        prompt.show_hints(f"Enter: new line · {keys}", keys)
        self.query_one(Banner).warn(None)
        speed = self.query_one(SpeedPanel)
        speed.show_proof(self._ctx.proof)
        speed.show_session(summarize_session([]))
        speed.show_draft(self._ctx.backend.info.draft)
        speed.replay_speed = self._ctx.backend.info.replay_speed
        self.query_one(SpeedStrip).replay_speed = speed.replay_speed
        with self._storage_errors_reported():
            conversations = self._ctx.store.list_conversations(limit=1)
            if conversations:
                await self._open(conversations[0].id)
            else:
                await self._new_draft()
        prompt.focus()

    # Conversations

    async def _open(self, conversation_id: int, message_id: int | None = None) -> None:
        self._cancel_edit()
        store = self._ctx.store
        self.conversation = store.get_conversation(conversation_id)
        self.sub_title = self.conversation.title
        widgets = [w for m in store.messages(conversation_id) if (w := message_widget(m))]
        found = [w for w in widgets if getattr(w, "message_id", None) == message_id]
        transcript = self.query_one(Transcript)
        await transcript.show(widgets or [_note("No messages yet.")], found[0] if found else None)
        self._refresh_sidebar()

    async def _new_draft(self) -> None:
        self._cancel_edit()
        self.conversation = None
        self._draft = ChatSettings("", self._ctx.default_sampling)
        self.sub_title = "New chat"
        note = _note("New chat. Type below; it is saved when you send.")
        await self.query_one(Transcript).show([note])
        self._refresh_sidebar()

    def _refresh_sidebar(self) -> None:
        sidebar = self.query_one(Sidebar)
        if not sidebar.search_query:
            current = self.conversation.id if self.conversation else None
            with self._storage_errors_reported():
                sidebar.show_conversations(self._ctx.store.list_conversations(), current)

    @on(Sidebar.SearchChanged)
    def _search(self, event: Sidebar.SearchChanged) -> None:
        if event.query:
            with self._storage_errors_reported():
                self.query_one(Sidebar).show_hits(self._ctx.store.search(event.query))
        else:
            self._refresh_sidebar()

    @on(Sidebar.Opened)
    async def _opened(self, event: Sidebar.Opened) -> None:
        if not self._busy():
            with self._storage_errors_reported():
                await self._open(event.conversation_id, event.message_id)

    # Sending and streaming

    async def action_send(self) -> None:
        """Send the prompt's text and stream the reply."""
        prompt = self.query_one("#prompt", Composer)
        text = prompt.message.strip()
        if not text or self._busy():
            return
        store, edit = self._ctx.store, self._edit
        transcript = self.query_one(Transcript)
        with self._storage_errors_reported():
            conversation = self.conversation or store.create_conversation(
                title_from(text),
                system_prompt=self._draft.system_prompt,
                model=self._ctx.backend.info.model,
                sampling=self._draft.sampling,
            )
            try:
                replacing = edit.message_ids if edit is not None else ()
                message = store.add_user_message(conversation.id, text, replacing=replacing)
            except StorageError:
                if self.conversation is None:  # leave no empty chat behind, if it can go
                    with suppress(StorageError):
                        store.delete_conversation(conversation.id)
                raise
            self.conversation = conversation
            self.sub_title = conversation.title
            if edit is not None:
                self._edit = None
                await transcript.remove_children(edit.widgets(transcript))
            await transcript.query(".note").remove()
            prompt.clear()
            await transcript.mount(UserMessage(message.content, message.id))
            await self._generate(conversation)

    async def _generate(self, conversation: Conversation) -> None:
        ctx = self._ctx
        history = ctx.store.messages(conversation.id)
        request = ReplyRequest(
            conversation.id,
            request_messages(conversation.system_prompt, history),
            conversation.sampling,
        )
        writer = ctx.store.start_reply(
            conversation.id, engine_run_id=ctx.engine_run_id, clock=ctx.clock
        )
        view = await self.query_one(Transcript).add_reply()
        self._replies.start(ReplyRun(request, writer, ctx.clock), view)
        self._refresh_sidebar()

    def reply_progressed(self, run: ReplyRun) -> None:
        """Show the live numbers of the reply in flight."""
        self.query_one(SpeedPanel).show_live(run.live_snapshot(), run.ttft_s)
        self.query_one(SpeedStrip).show_live(run.live_snapshot())

    def reply_ended(self, run: ReplyRun) -> None:
        """Show how the reply ended, and the session's numbers."""
        status = run.shown_status
        speed = self.query_one(SpeedPanel)
        speed.show_last(status, run.stats, self._ctx.backend.info.context_length)
        self.query_one(SpeedStrip).show_last(status, run.stats)
        if status is MessageStatus.COMPLETE and run.stats is not None:
            self.session_stats.append(run.stats)
            speed.show_session(summarize_session(self.session_stats))
            speculative = self._ctx.backend.info.speculative
            verdict = check_collapse(self.session_stats, speculative=speculative)
            self.query_one(Banner).show_verdict(verdict)
        if status is MessageStatus.ERROR:
            self.notify(run.error or "unknown error", title="The reply failed", severity="error")
        self._refresh_sidebar()

    def replies_unsaved(self, runs: list[ReplyRun]) -> None:  # kept in a file meanwhile
        if self._ctx.recovery and (notice := self._ctx.recovery.update(runs)):
            self.notify(notice, severity="warning")

    @property
    def run(self) -> ReplyRun | None:
        """The reply streaming now."""
        return self._replies.run

    def _busy(self) -> bool:
        if self.run is None:
            return False
        self.notify(
            f"A reply is streaming ({self._keys('stop_reply')} stops it).", severity="warning"
        )
        return True

    async def action_stop_reply(self) -> None:
        """Stop the reply (what arrived is kept, marked stopped), else cancel an edit."""
        if not await self._replies.stop():
            if self._cancel_edit():
                self.notify("Edit cancelled: the exchange is kept as it was.")
            self.query_one("#prompt").focus()

    async def stop_for_quit(self) -> list[ReplyRun]:
        """Stop the reply in flight (if any), store what arrived, and try once more to
        store the replies that could not be; the ones still unsaved."""
        return await self._replies.stop_for_quit()

    async def on_unmount(self) -> None:
        await self._replies.aclose()

    # Editing the conversation

    async def action_regenerate(self) -> None:
        """Replace the last reply with a new one."""
        conversation = self.conversation
        if conversation is None or self._busy():
            return
        self._cancel_edit()
        with self._storage_errors_reported():
            messages = self._ctx.store.messages(conversation.id)
            if messages and messages[-1].role is Role.ASSISTANT:
                await self._delete_messages([messages.pop().id])
            if not messages or messages[-1].role is not Role.USER:
                self.notify("There is no reply to regenerate.")
                return
            await self._generate(conversation)

    def action_edit_last(self) -> None:
        """Put the last message in the prompt to edit; its exchange stays until it is sent."""
        conversation = self.conversation
        if conversation is None or self._busy() or self._edit is not None:
            return
        prompt = self.query_one("#prompt", TextArea)
        with self._storage_errors_reported():
            messages = self._ctx.store.messages(conversation.id)
            hint = f"editing · {self._keys('send')}: send in its place · " + (
                f"{self._keys('stop_reply')}: keep the exchange"
            )
            self._edit = ExchangeEdit.begin(messages, prompt, self.query_one(Transcript), hint)
            if self._edit is None:
                self.notify("There is no message to edit.")

    def _cancel_edit(self) -> bool:
        """End the edit in progress unsent (the exchange stays); False when there was none."""
        edit, self._edit = self._edit, None
        if edit is not None:
            edit.cancel(self.query_one("#prompt", TextArea), self.query_one(Transcript))
        return edit is not None

    async def _delete_messages(self, message_ids: list[int]) -> None:
        for message_id in message_ids:
            self._ctx.store.delete_message(message_id)
        for widget in list(self.query_one(Transcript).children):
            if getattr(widget, "message_id", None) in message_ids:
                await widget.remove()

    # Chat management

    async def action_new_chat(self) -> None:
        """Start a new chat (stored when its first message is sent)."""
        if not self._busy():
            await self._new_draft()
            self.query_one("#prompt").focus()

    def action_search(self) -> None:
        """Search all chats."""
        sidebar = self.query_one(Sidebar)
        self.show_panel(sidebar, True)
        sidebar.focus_search()

    def action_rename_chat(self) -> None:
        """Rename the open chat."""
        if self.conversation is None:
            self.notify("This chat has no title yet: send a message first.")
            return
        self.app.push_screen(RenameDialog(self.conversation.title), self._renamed)

    def _renamed(self, title: str | None) -> None:
        if title and self.conversation is not None:
            with self._storage_errors_reported():
                self._ctx.store.rename(self.conversation.id, title)
                self.conversation = self._ctx.store.get_conversation(self.conversation.id)
                self.sub_title = title
                self._refresh_sidebar()

    def action_delete_chat(self) -> None:
        """Delete the open chat, after confirmation."""
        conversation = self.conversation
        if conversation is None or self._busy():
            return
        with self._storage_errors_reported():
            count = len(self._ctx.store.messages(conversation.id))
            question = (
                f"Delete “{conversation.title}” and its {count} messages? This cannot be undone."
            )
            self.app.push_screen(ConfirmDialog(question), partial(self._deleted, conversation.id))

    async def _deleted(self, conversation_id: int, confirmed: bool | None) -> None:
        if not confirmed or self._busy():
            return
        with self._storage_errors_reported():
            self._ctx.store.delete_conversation(conversation_id)
            remaining = self._ctx.store.list_conversations(limit=1)
            if remaining:
                await self._open(remaining[0].id)
            else:
                await self._new_draft()
            self.notify("Chat deleted.")

    def action_chat_settings(self) -> None:
        """Edit the chat's system prompt and sampling."""
        conversation = self.conversation
        current = (
            ChatSettings(conversation.system_prompt, conversation.sampling)
            if conversation is not None
            else self._draft
        )
        self.app.push_screen(SettingsDialog(current), self._settings_saved)

    def _settings_saved(self, settings: ChatSettings | None) -> None:
        if settings is None:
            return
        if self.conversation is None:
            self._draft = settings
            self.notify("Chat settings saved.")
            return
        with self._storage_errors_reported():
            store = self._ctx.store
            store.update_settings(
                self.conversation.id,
                system_prompt=settings.system_prompt,
                sampling=settings.sampling,
            )
            self.conversation = store.get_conversation(self.conversation.id)
            self.notify("Chat settings saved.")


def _note(text: str) -> Static:
    return Static(text, classes="note")
