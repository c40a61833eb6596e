"""What the history store hands out: frozen records, never live rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.core.chat import DEFAULT_THINKING, Role, Sampling, Thinking
from app.core.proof_report import ProofReport
from app.telemetry import ReplyStats


class MessageStatus(StrEnum):
    """How a stored message ended."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    """Still being written, or its writer died: the text is what was flushed."""
    STOPPED = "stopped"
    """Ended early: the user stopped it, the server aborted it, or its stream ended without a
    final event; the text is what arrived."""
    CUT = "cut"
    """Cut off by a limit (its token budget, or the end of the context) before it ended;
    `StoredMessage.cut_reason` names the limit."""
    ERROR = "error"
    """The backend failed; `StoredMessage.error` says how."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """One chat and the settings its replies are generated with."""

    id: int
    title: str
    system_prompt: str
    model: str
    sampling: Sampling
    created_at: str
    """ISO-8601 UTC, like every timestamp in the store."""
    updated_at: str
    """Bumped whenever a message is added, finished or deleted."""
    archived: bool
    thinking: Thinking = DEFAULT_THINKING


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """One message as stored; assistant replies keep reasoning apart from the answer."""

    id: int
    conversation_id: int
    role: Role
    content: str
    reasoning: str
    status: MessageStatus
    created_at: str
    stats: ReplyStats | None
    error: str | None
    engine_run_id: int | None = None
    """The engine run that measured this reply, when its stats were recorded with one."""
    updated_at: str = ""
    """When the row was last written (the last flush of a partial reply)."""
    parent_id: int | None = None
    """The message this one answers or follows; None for a first message."""
    chosen: bool = True
    """Whether it is the alternative shown among its parent's children (`app.storage.tree`)."""
    cut_reason: str | None = None
    """For status CUT: the limit that cut it off, in words."""
    attachments: tuple[str, ...] = ()
    """The names of the files whose text a user message carries, in order."""

    @property
    def continuable(self) -> bool:
        """A reply that was cut off or stopped, with text to go on from."""
        continuable = self.status in (MessageStatus.CUT, MessageStatus.STOPPED)
        return continuable and self.role is Role.ASSISTANT and bool(self.content or self.reasoning)


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A message matching a search; `snippet` is one line with matches marked «like this»."""

    conversation_id: int
    message_id: int
    title: str
    snippet: str
    role: Role


@dataclass(frozen=True, slots=True)
class EngineRun:
    """One start of the model side, with the proof of what it ran."""

    id: int
    kind: str
    model: str
    sglang_version: str
    profile: str
    proof_summary: str
    """`ProofReport.summary()`, e.g. `stack: 8 pass, 0 fail, 0 off`."""
    proof: Mapping[str, Any]
    """`ProofReport.to_dict()`."""
    started_at: str

    @property
    def profile_label(self) -> str:
        """The profile as reports show it: `stack`, or `stack (unproven)` where the proof
        did not pass (a server chatted with anyway, `--allow-unoptimized`), did not run, or
        cannot be read."""
        try:
            proven = bool(self.proof) and ProofReport.from_dict(self.proof).ok
        except (KeyError, TypeError, ValueError):
            proven = False
        return self.profile if proven else f"{self.profile} (unproven)"


@dataclass(frozen=True, slots=True)
class MeasuredReply:
    """A reply's measurements without its text: what speed reports read."""

    message_id: int
    status: MessageStatus
    stats: ReplyStats
    run: EngineRun | None
    """The engine run that measured it, when recorded with one."""


@dataclass(frozen=True, slots=True)
class Thread:
    """A conversation with its messages, every branch, oldest first."""

    conversation: Conversation
    messages: list[StoredMessage]
