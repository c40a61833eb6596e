"""`ComposerActions`: the chat screen's actions around the prompt: attaching a file's text,
recalling earlier prompts, editing the draft in `$VISUAL`/`$EDITOR`, and exporting the open
chat."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from itertools import islice
from pathlib import Path
from typing import Final

from textual.app import SuspendNotSupported
from textual.screen import Screen
from textual.widgets import Static

from app.core.attachment import (
    Attachment,
    AttachmentRefused,
    estimate_tokens,
    read_attachment,
    typed_part,
)
from app.core.chat import Role
from app.core.errors import ExportError, TargetExists
from app.files import write_atomic
from app.render.formats import FORMATS
from app.storage import Conversation
from app.storage.transfer.export import collect
from app.ui.chat_context import ChatContext
from app.ui.screens.dialogs import ConfirmDialog
from app.ui.screens.file_dialogs import AttachDialog, ExportDialog, export_format
from app.ui.screens.store_errors import storage_errors_noticed
from app.ui.widgets.composer import Composer

RECALL_DEPTH: Final = 500
"""How many earlier prompts Up can reach."""


class ComposerActions:
    """What the user does with the prompt of `screen` before sending, in the open chat
    (`conversation` says which: None for a new one)."""

    def __init__(
        self,
        screen: Screen[None],
        context: ChatContext,
        conversation: Callable[[], Conversation | None],
    ) -> None:
        self._screen = screen
        self._ctx = context
        self._conversation = conversation
        self.attached: tuple[Attachment, ...] = ()
        """The files whose text goes with the next message."""
        self._recalled: list[str] | None = None
        """Earlier prompts, newest first, read at the first Up; None: not recalling."""
        self._recall_index = -1

    @property
    def composer(self) -> Composer:
        """The composer."""
        return self._screen.query_one("#prompt", Composer)

    # Attaching

    def attach_file(self) -> None:
        """Pick a file whose text goes with the next message."""
        names = [attachment.name for attachment in self.attached]
        dialog = AttachDialog(Path.cwd(), names, self.detach_all)
        self._screen.app.push_screen(dialog, self._attach_picked)

    def _attach_picked(self, path: Path | None) -> None:
        if path is None:
            return
        try:
            attachment = read_attachment(path, self.room_left())
        except AttachmentRefused as refused:
            self._screen.notify(str(refused), severity="error")
            return
        self.attached = (*self.attached, attachment)
        self._show_attached()
        self.composer.focus()

    def detach_all(self) -> None:
        """Remove the attached files (the typed draft stays)."""
        if self.attached:
            self.sent()
            self._screen.notify("Attached files removed.")

    def sent(self) -> None:
        """The message went: no file is attached any more."""
        self.attached = ()
        self._show_attached()

    def _show_attached(self) -> None:
        strip = self._screen.query_one("#attached", Static)
        strip.update("\n".join(f"📎 {a.label()}" for a in self.attached))
        strip.display = bool(self.attached)

    def room_left(self) -> int | None:
        """About how many tokens of the model's context the next message may still take
        (None: the context's size is not known yet)."""
        context = self._ctx.backend.info.context_length
        if context is None:
            return None
        conversation = self._conversation()
        used = estimate_tokens(conversation.system_prompt if conversation else "")
        for message in self._ctx.store.messages(conversation.id) if conversation else []:
            if message.stats is not None:  # counted by the model: everything up to here
                used = message.stats.prompt_tokens + message.stats.completion_tokens
            else:
                used += estimate_tokens(message.content)
        draft = estimate_tokens(self.composer.message)
        return context - used - draft - sum(a.tokens for a in self.attached)

    # Recalling earlier prompts

    def may_recall(self, action: str) -> bool:
        """Up and Down (`action`) recall prompts only in the focused composer, when it is
        empty or still shows what was recalled; otherwise they move the cursor as usual."""
        screen = self._screen
        prompt = screen.query("#prompt").first(Composer) if screen.query("#prompt") else None
        if prompt is None or screen.focused is not prompt:
            return False
        if self._recalled is None or prompt.text != self._shown_recall():
            self._recalled, self._recall_index = None, -1  # typing ended the recall
            return action == "recall_earlier" and not prompt.text
        return True

    def _shown_recall(self) -> str:
        recalled = self._recalled or []
        return recalled[self._recall_index] if 0 <= self._recall_index < len(recalled) else ""

    def recall_earlier(self) -> None:
        """In an empty prompt: the previous prompt sent (again: the one before)."""
        if self._recalled is None:
            with storage_errors_noticed(self._screen):
                self._recalled = list(islice(self._earlier_prompts(), RECALL_DEPTH))
            self._recall_index = -1
        if self._recalled is None or self._recall_index + 1 >= len(self._recalled or []):
            if not self._recalled:
                self._recalled = None
                self._screen.notify("No earlier prompt to recall.")
            return
        self._recall_index += 1
        self._load_recall()

    def recall_later(self) -> None:
        """While recalling: the next newer prompt, then the empty prompt again."""
        self._recall_index -= 1
        if self._recall_index < 0:
            self._recalled, self._recall_index = None, -1
            self.composer.clear()
            return
        self._load_recall()

    def _load_recall(self) -> None:
        prompt = self.composer
        prompt.load_exact(self._shown_recall())
        prompt.move_cursor(prompt.document.end)

    def _earlier_prompts(self) -> Iterator[str]:
        """The user's prompts, newest first (the chats most recently used first), each once
        in a row, without the text of the files they carried."""
        store, last = self._ctx.store, None
        for conversation in store.list_conversations(include_archived=True):
            for message in reversed(store.messages(conversation.id)):
                if message.role is Role.USER:
                    typed = typed_part(message.content, message.attachments).strip()
                    if typed and typed != last:
                        yield typed
                    last = typed

    # $EDITOR

    def open_editor(self) -> None:
        """Edit the draft in `$VISUAL` (else `$EDITOR`); its saved text comes back."""
        command = os.environ.get("VISUAL") or os.environ.get("EDITOR")
        if not command or not command.strip():
            self._screen.notify(
                "No editor: set $VISUAL or $EDITOR (e.g. EDITOR=nano).", severity="error"
            )
            return
        prompt = self.composer
        with tempfile.TemporaryDirectory(prefix="ling-chat-draft-") as folder:
            path = Path(folder) / "prompt.md"
            try:
                write_atomic(path, [prompt.message], replace=False, sync=False)
                with self._screen.app.suspend():
                    done = subprocess.run([*shlex.split(command), str(path)], check=False)
                text = path.read_text(encoding="utf-8")
            except SuspendNotSupported:
                why = "This terminal cannot hand over to an editor."
                self._screen.notify(why, severity="error")
                return
            except (OSError, ValueError, ExportError) as exc:
                why = getattr(exc, "strerror", None) or str(exc)
                self._screen.notify(f"The editor {command!r} failed: {why}", severity="error")
                return
        if done.returncode != 0:
            self._screen.notify(
                f"The editor {command!r} exited with {done.returncode}: the draft is unchanged.",
                severity="error",
            )
            return
        prompt.load_exact(text.removesuffix("\n"))
        prompt.move_cursor(prompt.document.end)
        prompt.focus()

    # Export

    def export_chat(self) -> None:
        """Export the open chat to a Markdown, HTML or JSON file."""
        conversation = self._conversation()
        if conversation is None:
            self._screen.notify("Nothing to export yet: send a message first.")
            return
        suggested = Path.cwd() / f"ling-chat-{conversation.id}.md"
        self._screen.app.push_screen(ExportDialog(suggested), self._export_to)

    def _export_to(self, path: Path | None, replace: bool = False) -> None:
        conversation, fmt = self._conversation(), export_format(path) if path else None
        if conversation is None or path is None or fmt is None:
            return
        try:
            with storage_errors_noticed(self._screen):
                export = collect(self._ctx.store, [conversation.id])
                write_atomic(path, FORMATS[fmt](export), replace=replace)
                self._screen.notify(f"Exported this chat to {path}")
        except TargetExists:
            question = f"{path} exists. Replace it with this chat?"
            self._screen.app.push_screen(
                ConfirmDialog(question, confirm="Replace"),
                lambda yes: self._export_to(path, replace=True) if yes else None,
            )
        except ExportError as error:
            self._screen.notify(str(error), severity="error")
