"""The chat screen: sidebar, transcript, prompt and speed panel, and the chat's actions."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from functools import partial

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Static

from app.core.attachment import with_attachments
from app.core.errors import StorageError
from app.render.speed import speed_by_context
from app.storage import Conversation, MessageStatus, StoredMessage
from app.ui.bindings import CHAT_ACTIONS, action_by_id, keys_for
from app.ui.chat_context import ChatContext
from app.ui.format import proof_text, title_from
from app.ui.reply import ReplyRun, reply_request
from app.ui.reply_controller import ReplyController
from app.ui.screens.branches import BranchActions
from app.ui.screens.composer_actions import ComposerActions
from app.ui.screens.dialogs import (
    ChatSettings,
    ConfirmDialog,
    RenameDialog,
    ReportScreen,
    SettingsDialog,
)
from app.ui.screens.preset_actions import PresetActions
from app.ui.screens.store_errors import storage_errors_noticed
from app.ui.screens.view_actions import ViewActionsScreen
from app.ui.widgets.banner import Banner
from app.ui.widgets.composer import Composer
from app.ui.widgets.messages import UserMessage
from app.ui.widgets.sidebar import Sidebar
from app.ui.widgets.speed_panel import SpeedPanel
from app.ui.widgets.speed_strip import SpeedStrip
from app.ui.widgets.transcript import Transcript


class ChatScreen(ViewActionsScreen):
    """One conversation at a time, with its reply streaming into the transcript.

    Its actions around the prompt, on branches and on presets are done by `composing`,
    `branches` and `presets`; its actions on panels and copying by its base.
    """

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
        self._replies = ReplyController(
            context.backend, self, self, refresh_s=1 / context.refresh_hz
        )
        self.composing = ComposerActions(self, context, lambda: self.conversation)
        self.branches = BranchActions(
            self,
            context,
            conversation=lambda: self.conversation,
            generate=self._generate,
            busy=self._busy,
            keys=self._keys,
        )
        self.presets = PresetActions(self, context, new_chat=self._new_chat, busy=self._busy)

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="main"):
            yield Sidebar(id="sidebar")
            with Vertical(id="chat"):
                yield Banner(self._ctx.proof, self._keys("show_proof"), id="banner")
                yield Transcript(id="transcript")
                yield SpeedStrip(self._keys("toggle_speed"), id="speed-strip")
                yield Static(id="attached", markup=False)
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
        self.show_start(self._ctx.proof, self._ctx.backend.info)
        with storage_errors_noticed(self):
            conversations = self._ctx.store.list_conversations(limit=1)
            if conversations:
                await self._open(conversations[0].id)
            else:
                await self._new_chat()
        prompt.focus()

    # Conversations

    async def _open(self, conversation_id: int, message_id: int | None = None) -> None:
        """Show a conversation; a search hit (`message_id`) with its branch."""
        self.branches.cancel_edit()
        store = self._ctx.store
        self.conversation = store.get_conversation(conversation_id)
        self.sub_title = self.conversation.title
        if message_id is not None:
            store.choose(message_id)
        self.branches.path.selected = None
        transcript = self.query_one(Transcript)
        if not await self.branches.path.show(transcript, conversation_id, found=message_id):
            await transcript.show([Static("No messages yet.", classes="note")])
        self._refresh_sidebar()

    async def _new_chat(self, settings: ChatSettings | None = None) -> None:
        """Show a new chat, not stored until its first message, with `settings` (default:
        the default preset's); the prompt has the focus."""
        self.branches.cancel_edit()
        self.conversation = None
        self._draft = settings or self.presets.new_chat_settings()
        self.sub_title = "New chat"
        note = Static("New chat. Type below; it is saved when you send.", classes="note")
        await self.query_one(Transcript).show([note])
        self._refresh_sidebar()
        self.query_one("#prompt").focus()

    def _refresh_sidebar(self) -> None:
        sidebar = self.query_one(Sidebar)
        if not sidebar.search_query:
            current = self.conversation.id if self.conversation else None
            with storage_errors_noticed(self):
                sidebar.show_conversations(self._ctx.store.list_conversations(), current)

    @on(Sidebar.SearchChanged)
    def _search(self, event: Sidebar.SearchChanged) -> None:
        if event.query:
            with storage_errors_noticed(self):
                self.query_one(Sidebar).show_hits(self._ctx.store.search(event.query))
        else:
            self._refresh_sidebar()

    @on(Sidebar.Opened)
    async def _opened(self, event: Sidebar.Opened) -> None:
        if not self._busy():
            with storage_errors_noticed(self):
                await self._open(event.conversation_id, event.message_id)

    # Sending and streaming

    async def action_send(self) -> None:
        """Send the prompt's text and stream the reply."""
        prompt = self.query_one("#prompt", Composer)
        typed, attached = prompt.message.strip(), self.composing.attached
        if not (typed or attached) or self._busy():
            return
        text = with_attachments(typed, attached)
        store, edit = self._ctx.store, self.branches.edit
        transcript = self.query_one(Transcript)
        with storage_errors_noticed(self):
            conversation = self.conversation or store.create_conversation(
                title_from(typed or attached[0].name),
                system_prompt=self._draft.system_prompt,
                model=self._ctx.backend.info.model,
                sampling=self._draft.sampling,
                thinking=self._draft.thinking,
            )
            try:
                edited = edit.message_ids[0] if edit is not None else None
                names = [attachment.name for attachment in attached]
                message = store.add_user_message(
                    conversation.id, text, alternative_to=edited, attachments=names
                )
            except StorageError:
                if self.conversation is None:  # leave no empty chat behind, if it can go
                    with suppress(StorageError):
                        store.delete_conversation(conversation.id)
                raise
            self.conversation = conversation
            self.sub_title = conversation.title
            prompt.clear()
            self.composing.sent()
            self.branches.path.selected = None
            if edit is not None:  # the edited branch stays, off screen
                self.branches.edit = None
                await self.branches.path.show(transcript, conversation.id)
            else:
                await transcript.query(".note").remove()
                await transcript.mount(UserMessage(message.content, message.id))
            await self._generate(conversation, message.id)

    async def _generate(
        self, conversation: Conversation, parent_id: int, continuing: StoredMessage | None = None
    ) -> None:
        """Stream a new reply to message `parent_id` (the model sees the path on screen up to
        it), or go on in place with `continuing`, the cut-off or stopped reply to it."""
        ctx = self._ctx
        history = ctx.store.messages(conversation.id)
        last = continuing.id if continuing is not None else parent_id
        seen = history[: [message.id for message in history].index(last) + 1]
        request = reply_request(conversation, seen, continuing)
        writer = ctx.store.start_reply(
            conversation.id,
            parent_id=parent_id,
            engine_run_id=ctx.engine_run_id,
            clock=ctx.clock,
            continuing=continuing,
        )
        transcript = self.query_one(Transcript)
        view = await transcript.add_reply() if continuing is None else transcript.reply(continuing)
        self._replies.start(ReplyRun(request, writer, ctx.clock, continuing), view)
        self._refresh_sidebar()

    def reply_ended(self, run: ReplyRun) -> None:
        """Show how the reply ended, and the session's numbers."""
        info = self._ctx.backend.info
        self.show_ended(run, context_length=info.context_length, speculative=info.speculative)
        if run.shown_status is MessageStatus.ERROR:
            self.notify(run.error or "unknown error", title="The reply failed", severity="error")
        if run.refused:
            self.notify(run.refused, title="The reply was not continued", severity="warning")
        if self.conversation is not None:
            with storage_errors_noticed(self):
                self.branches.path.retitle(self.query_one(Transcript), self.conversation.id)
        self._refresh_sidebar()
        if self._ctx.reply_finished is not None:
            self._ctx.reply_finished()

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
            if self.branches.cancel_edit():
                self.notify("Edit cancelled: the exchange is kept as it was.")
            self.query_one("#prompt").focus()

    async def stop_for_quit(self) -> list[ReplyRun]:
        """Stop the reply in flight (if any), store what arrived, and try once more to
        store the replies that could not be; the ones still unsaved."""
        return await self._replies.stop_for_quit()

    async def on_unmount(self) -> None:
        await self._replies.aclose()

    # The actions done by the screen's parts

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("recall_earlier", "recall_later"):
            return self.composing.may_recall(action)
        return True

    def action_attach_file(self) -> None:
        self.composing.attach_file()

    def action_recall_earlier(self) -> None:
        self.composing.recall_earlier()

    def action_recall_later(self) -> None:
        self.composing.recall_later()

    def action_open_editor(self) -> None:
        self.composing.open_editor()

    def action_export_chat(self) -> None:
        self.composing.export_chat()

    async def action_regenerate(self) -> None:
        await self.branches.regenerate()

    async def action_continue_reply(self) -> None:
        await self.branches.continue_reply()

    def action_edit_message(self) -> None:
        self.branches.edit_message()

    async def action_switch_alternative(self, step: int) -> None:
        await self.branches.switch(step)

    def action_select_message(self, step: int) -> None:
        self.branches.select(step)

    def action_show_proof(self) -> None:
        """Show the start-up proof report."""
        self.app.push_screen(ReportScreen(proof_text(self._ctx.proof)))

    def action_speed_by_context(self) -> None:
        """Show how decoding slowed as the stored conversations grew."""
        with storage_errors_noticed(self):
            report = speed_by_context(self._ctx.store)
            title = Text("Speed by context length (prompt tokens)\n\n", style="bold")
            self.app.push_screen(ReportScreen(title + Text(report)))

    # Chat management

    async def action_new_chat(self) -> None:
        """Start a new chat (stored when its first message is sent)."""
        if not self._busy():
            await self._new_chat()

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
            with storage_errors_noticed(self):
                self._ctx.store.rename(self.conversation.id, title)
                self.conversation = self._ctx.store.get_conversation(self.conversation.id)
                self.sub_title = title
                self._refresh_sidebar()

    def action_delete_chat(self) -> None:
        """Delete the open chat, after confirmation."""
        conversation = self.conversation
        if conversation is None or self._busy():
            return
        with storage_errors_noticed(self):
            count = len(self._ctx.store.all_messages(conversation.id))
            question = (
                f"Delete “{conversation.title}” and its {count} messages? This cannot be undone."
            )
            self.app.push_screen(ConfirmDialog(question), partial(self._deleted, conversation.id))

    async def _deleted(self, conversation_id: int, confirmed: bool | None) -> None:
        if not confirmed or self._busy():
            return
        with storage_errors_noticed(self):
            self._ctx.store.delete_conversation(conversation_id)
            remaining = self._ctx.store.list_conversations(limit=1)
            if remaining:
                await self._open(remaining[0].id)
            else:
                await self._new_chat()
            self.notify("Chat deleted.")

    def action_chat_settings(self) -> None:
        """Edit the chat's system prompt and sampling."""
        conversation = self.conversation
        current = (
            ChatSettings(conversation.system_prompt, conversation.sampling, conversation.thinking)
            if conversation is not None
            else self._draft
        )
        self.app.push_screen(SettingsDialog(current, self.presets.save), self._settings_saved)

    def _settings_saved(self, settings: ChatSettings | None) -> None:
        if settings is None:
            return
        if self.conversation is None:
            self._draft = settings
            self.notify("Chat settings saved.")
            return
        with storage_errors_noticed(self):
            store = self._ctx.store
            store.update_settings(
                self.conversation.id,
                system_prompt=settings.system_prompt,
                sampling=settings.sampling,
                thinking=settings.thinking,
            )
            self.conversation = store.get_conversation(self.conversation.id)
            self.notify("Chat settings saved.")
