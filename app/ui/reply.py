"""`ReplyRun`: one reply in flight, from the backend's events to the store and the screen.

The run is fed every event the moment it arrives (cheap bookkeeping only, so the backend's
stream is always drained promptly) and `ReplyController` takes the text that has not been
drawn yet on its own, paced schedule.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.backend.protocol import ReplyDone, ReplyError, ReplyEvent, TextChunk
from app.core.chat import (
    DEFAULT_THINKING,
    ChatMessage,
    PartialReply,
    Role,
    Sampling,
    Thinking,
    budget_words,
)
from app.core.reply_usage import ReplyUsage
from app.storage import Conversation, MessageStatus, ReplyWriter, StoredMessage
from app.telemetry import ReplyStats, continued_stats, reply_stats
from app.telemetry.windows import LiveRate, LiveSnapshot


@dataclass(frozen=True, slots=True)
class ReplyRequest:
    """What is sent to the backend for one reply."""

    conversation_id: int
    messages: tuple[ChatMessage, ...]
    sampling: Sampling
    thinking: Thinking = DEFAULT_THINKING
    partial: PartialReply | None = None
    """The reply so far, when this request continues it."""


ENDINGS = {"abort": MessageStatus.STOPPED, "length": MessageStatus.CUT}
"""A backend's finish reason -> the reply's status (`stop` and any other: complete)."""


class ReplyRun:
    """The state of one streaming reply: text, timings, live speed, and its stored row."""

    def __init__(
        self,
        request: ReplyRequest,
        writer: ReplyWriter,
        clock: Callable[[], float],
        continuing: StoredMessage | None = None,
    ) -> None:
        """`continuing`: the stored reply this run goes on with (cut off or stopped); its
        text stays in front of the new, and its measurements are summed with the new's."""
        self.request = request
        self.continuing = continuing
        self._writer = writer
        self._clock = clock
        self.started_at = clock()
        """When the request went out; `sent()` moves it to the moment it really does."""
        self.live = LiveRate()
        self.arrivals: list[float] = []
        self.answer = continuing.content if continuing is not None else ""
        self.reasoning = continuing.reasoning if continuing is not None else ""
        self._pending_answer: list[str] = []
        self._pending_reasoning: list[str] = []
        self.status: MessageStatus | None = None
        """Set once the reply has ended and been stored."""
        self.stats: ReplyStats | None = None
        self.error: str | None = None
        self.cut_reason: str | None = None
        """For status CUT: the limit that cut the reply off."""
        self.refused: str | None = None
        """Why a continuation brought nothing (the reply stays as it was): said, not stored."""
        self.bug: str | None = None
        """A bug that ended the reply (`Type: message`): shown and logged, never stored."""
        self.stop_requested = False
        self._ending: tuple[MessageStatus, ReplyUsage | None, float, str | None, str] | None = None
        """The last ending tried, kept for `close` to retry when it could not be stored."""

    @property
    def finished(self) -> bool:
        """True once the reply has ended and been stored."""
        return self.status is not None

    @property
    def shown_status(self) -> MessageStatus:
        """The status to show once the stream is over: `PARTIAL` while it is not stored."""
        return self.status or MessageStatus.PARTIAL

    @property
    def message_id(self) -> int | None:
        """The stored reply's id, once a row exists."""
        return self._writer.message_id

    @property
    def ttft_s(self) -> float | None:
        """Time to the first text, once it has arrived."""
        return self.arrivals[0] - self.started_at if self.arrivals else None

    def live_snapshot(self) -> LiveSnapshot:
        """The live speed numbers so far."""
        return self.live.snapshot()

    def sent(self) -> None:
        """The request is being sent now: TTFT counts from here, not from the UI's set-up."""
        self.started_at = self._clock()

    def observe(self, event: ReplyEvent) -> None:
        """Take one backend event: keep its text and timing and store it."""
        if self.finished:
            return
        if isinstance(event, TextChunk):
            self.arrivals.append(event.at)
            # A backend's odd count (time or tokens going back) must not end the reply.
            with contextlib.suppress(ValueError):
                self.live.observe(event.at, event.completion_tokens)
            if event.reasoning:
                self.reasoning += event.reasoning
                self._pending_reasoning.append(event.reasoning)
            if event.answer:
                self.answer += event.answer
                self._pending_answer.append(event.answer)
            self._writer.append(answer=event.answer, reasoning=event.reasoning)
        elif isinstance(event, ReplyDone):
            status = ENDINGS.get(event.finish_reason, MessageStatus.COMPLETE)
            cut_by = event.cut_by or budget_words(self.request.sampling.max_new_tokens)
            self._finish(status, event.usage, event.at, None, cut_by)
        elif isinstance(event, ReplyError):
            self.fail(event.message, event.at)

    def fail(self, message: str, at: float | None = None) -> None:
        """End the reply with an error. A continuation that brought nothing leaves its reply
        as it was, and one that brought text ends stopped: the error is said (`refused`),
        not stored, so that the reply stays in the chat and can be continued again."""
        if self.finished:
            return
        at = self._clock() if at is None else at
        if self.continuing is None:
            self._finish(MessageStatus.ERROR, None, at, message)
            return
        self.refused = message
        if self.arrivals:
            self._finish(MessageStatus.STOPPED, None, at)
        else:
            self._writer.leave()
            self.status, self.stats = self.continuing.status, self.continuing.stats
            self.cut_reason = self.continuing.cut_reason

    def close(self, *, wait: bool = True) -> None:
        """Store what arrived, as stopped if the stream ended without a final event.

        An ending whose storing failed is retried as it was; `wait=False` does not wait
        out a busy database.

        Raises:
            StorageError: the reply still cannot be stored (it stays unfinished).
        """
        if not self.finished:
            ending = self._ending or (MessageStatus.STOPPED, None, self._clock(), None, "")
            self._finish(*ending, wait=wait)

    def flush(self) -> None:
        """Commit the text received so far (for a stream that stalls)."""
        self._writer.flush()

    def take_pending(self) -> tuple[str, str]:
        """The answer and reasoning text not drawn yet, as (answer, reasoning)."""
        answer = "".join(self._pending_answer)
        reasoning = "".join(self._pending_reasoning)
        self._pending_answer.clear()
        self._pending_reasoning.clear()
        return answer, reasoning

    def _finish(
        self,
        status: MessageStatus,
        usage: ReplyUsage | None,
        ended_at: float,
        error: str | None = None,
        cut_by: str = "",
        *,
        wait: bool = True,
    ) -> None:
        """Store the ending, then mark the run finished.

        `usage` None (no final report): the tokens counted as they arrived. `cut_by`: the
        limit, for status CUT. On StorageError the run stays unfinished and `close` retries
        this same ending.
        """
        self._ending = (status, usage, ended_at, error, cut_by)
        usage = usage or ReplyUsage(completion_tokens=self.live.tokens)
        stats = reply_stats(self.started_at, self.arrivals, usage, ended_at)
        if self.continuing is not None and self.continuing.stats is not None:
            stats = continued_stats(self.continuing.stats, stats)
        cut_reason = cut_by if status is MessageStatus.CUT else None
        self._writer.finish(status, stats, error, cut_reason=cut_reason, wait=wait)
        self.status, self.stats, self.error = status, stats, error
        self.cut_reason = cut_reason


def recovery_markdown(runs: Sequence[ReplyRun]) -> str:
    """Replies the history could not take, as Markdown: each after the question it answers."""
    parts = []
    for run in runs:
        question = next(
            (m.content for m in reversed(run.request.messages) if m.role is Role.USER), ""
        )
        parts.append(f"## Conversation #{run.request.conversation_id}\n\n> {question}\n")
        if run.reasoning:
            parts.append(f"<details><summary>Thinking</summary>\n\n{run.reasoning}\n\n</details>\n")
        parts.append(f"{run.answer}\n")
    return "# Replies ling-chat could not save to its history\n\n" + "\n".join(parts)


def request_messages(
    system_prompt: str, history: Sequence[StoredMessage]
) -> tuple[ChatMessage, ...]:
    """The chat sent to the model: the system prompt, then every turn with text.

    Failed replies are left out; stopped ones are kept, as the user saw them.
    """
    messages = [ChatMessage(Role.SYSTEM, system_prompt)] if system_prompt.strip() else []
    messages.extend(
        ChatMessage(message.role, message.content)
        for message in history
        if message.content
        and message.role is not Role.SYSTEM
        and message.status is not MessageStatus.ERROR
    )
    return tuple(messages)


def reply_request(
    conversation: Conversation,
    history: Sequence[StoredMessage],
    continuing: StoredMessage | None = None,
) -> ReplyRequest:
    """The request for a conversation's next reply, or for going on with `continuing`, its
    last message (the model then sees the conversation before it, and its text so far)."""
    partial = None
    if continuing is not None:
        history, partial = history[:-1], PartialReply(continuing.reasoning, continuing.content)
    return ReplyRequest(
        conversation.id,
        request_messages(conversation.system_prompt, history),
        conversation.sampling,
        conversation.thinking,
        partial,
    )
