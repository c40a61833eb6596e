"""A file's text attached to the next prompt: read, checked, estimated and wrapped.

The file's text goes into the user message between two delimiter lines naming the file, so
that the model (and anyone reading an export) sees where it starts and ends:

    the typed prompt

    --- file: notes.md ---
    the file's text
    --- end of file: notes.md ---

No backend offers a tokenizer to the UI, so a file's size in tokens is an estimate (4
characters a token, the estimate `MAX_TEXT_CHARS` uses too), labelled as one wherever shown.
"""

from __future__ import annotations

import math
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from app.core.chat import MAX_TEXT_CHARS
from app.core.errors import LingChatError

CHARS_PER_TOKEN: Final = 4
"""The estimate's characters a token."""
MAX_FILE_BYTES: Final = 4 * MAX_TEXT_CHARS
"""A file larger than this is refused unread: its text could not fit one message."""


class AttachmentRefused(LingChatError):
    """A file that cannot be attached; the message is one line naming it."""


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is (`CHARS_PER_TOKEN` characters a token)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def size_label(size: int) -> str:
    """A byte count for people: `812 B`, `2.1 kB`, `3.4 MB`."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} kB"
    return f"{size / 1_000_000:.1f} MB"


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file's text, read and checked, waiting to be sent with the prompt."""

    name: str
    """The file's name (no folder), as the delimiter and the stored message name it."""
    size: int
    """Its size in bytes."""
    text: str

    @property
    def tokens(self) -> int:
        """Its estimated size in tokens (the wrapping delimiters included)."""
        return estimate_tokens(wrap(self))

    def label(self) -> str:
        """Name, size and token estimate: `notes.md · 2.1 kB · ≈530 tokens (estimate)`."""
        return f"{self.name} · {size_label(self.size)} · ≈{self.tokens:,} tokens (estimate)"


def read_attachment(path: Path, room: int | None) -> Attachment:
    """The text of the file at `path`, if it is UTF-8 text that fits `room` tokens (None:
    the context's size is not known yet; only the message limit holds).

    Raises:
        AttachmentRefused: no regular file, unreadable, binary (a NUL byte), not UTF-8, or
            larger than the room left (one line naming the file).
    """
    where = f"cannot attach {path}"
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise AttachmentRefused(f"{where}: it is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise AttachmentRefused(
                f"{where}: {size_label(info.st_size)} is over the limit of one message "
                f"({size_label(MAX_FILE_BYTES)})"
            )
        data = path.read_bytes()
    except FileNotFoundError:
        raise AttachmentRefused(f"{where}: no such file") from None
    except OSError as exc:
        raise AttachmentRefused(f"{where}: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise AttachmentRefused(f"{where}: it is a binary file (it holds NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AttachmentRefused(
            f"{where}: it is not UTF-8 text (byte {exc.start:,} does not decode)"
        ) from None
    attachment = Attachment(path.name, len(data), text)
    if room is not None and attachment.tokens > room:
        raise AttachmentRefused(
            f"{where}: about {attachment.tokens:,} tokens (estimate), over the "
            f"{max(room, 0):,} left in the model's context"
        )
    if len(text) > MAX_TEXT_CHARS:
        raise AttachmentRefused(
            f"{where}: {len(text):,} characters, over the limit of one message ({MAX_TEXT_CHARS:,})"
        )
    return attachment


def _opening(name: str) -> str:
    return f"--- file: {name} ---\n"


def wrap(attachment: Attachment) -> str:
    """The file's text between its delimiter lines."""
    text = attachment.text if attachment.text.endswith("\n") else attachment.text + "\n"
    return f"{_opening(attachment.name)}{text}--- end of file: {attachment.name} ---"


def with_attachments(typed: str, attachments: Sequence[Attachment]) -> str:
    """The message to send: the typed prompt, then each file's wrapped text."""
    return "\n\n".join([part for part in [typed] if part] + [wrap(a) for a in attachments])


def typed_part(content: str, names: Sequence[str]) -> str:
    """What the user typed of a message that carries the files `names`."""
    if not names:
        return content
    start = content.find(_opening(names[0]))
    return content if start < 0 else content[:start].rstrip("\n")
