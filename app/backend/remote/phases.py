"""A server's reply in up to two chat requests when it thinks, as in-process
(app/backend/engine/phases.py): the thinking up to its budget, stopped by `</think>`; then
the answer within its own budget, continuing the reply so far (`continue_final_message`,
the thinking and `</think>` after the generation prompt as raw text).

SGLang 0.5.23's own thinking budget (`ThinkingBudgetLogitProcessor`) needs the server
started with `--enable-custom-logit-processor`, which a server ling-chat attaches to may
lack; two plain requests need nothing of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.backend.thinking import END_THINK, continued_text
from app.core.chat import (
    ChatMessage,
    PartialReply,
    Sampling,
    Thinking,
    budget_words,
    context_words,
)


@dataclass(frozen=True, slots=True)
class Request:
    """One chat request of a reply."""

    prefix: str | None
    """The reply so far, continued (raw text after the generation prompt); None: a new one."""
    max_tokens: int | None
    """None: up to the end of the context (the server could not count the prompt)."""
    thinking: bool
    """The request starts inside the thinking: its raw text is split at `</think>`."""
    limit: str
    """Its `max_tokens` in words: the reply's `cut_by` if it ends the reply by length."""
    by_budget: bool = False
    """Its `max_tokens` is the thinking budget."""


@dataclass(frozen=True, slots=True)
class RemotePlan:
    """A reply's requests: what is asked, and the room the server says is left."""

    messages: Sequence[ChatMessage]
    sampling: Sampling
    thinking: Thinking
    partial: PartialReply | None
    room: int | None
    """Tokens left in the context after the prompt; None when the server cannot say."""

    @property
    def enable_thinking(self) -> bool:
        """The chat template's switch: on for a thinking chat, and to continue a thinking."""
        return self.thinking.enabled or bool(self.partial and self.partial.reasoning)

    def first(self) -> Request:
        """The reply's first request: the thinking, or the answer when it does not think."""
        partial = self.partial
        prefix = continued_text(partial) if partial is not None else None
        thinks = self.thinking.enabled if partial is None else partial.thinking_open
        if not thinks:
            return self._answer(prefix, self.room)
        budget = self.thinking.budget
        if budget is not None and (self.room is None or budget < self.room):
            return Request(prefix, budget, True, f"the thinking budget of {budget:,} tokens", True)
        limit = context_words(self.room) if self.room is not None else "the model's context"
        return Request(prefix, self.room, True, limit)

    def next(
        self, done: Request, finish: str, matched: object, thought: str, tokens: int
    ) -> Request | None:
        """The answer's request after the thinking `done` ended (`finish`, the stop it
        `matched`, the thinking it wrote and its tokens), or None: the reply has ended."""
        closed = finish == "stop" and matched == END_THINK
        forced = finish == "length" and done.by_budget
        if not (closed or forced):
            return None
        room = None if self.room is None else self.room - tokens - 1
        if room is not None and room < 1:
            return None
        return self._answer(f"{done.prefix or ''}{thought}{END_THINK}", room)

    def _answer(self, prefix: str | None, room: int | None) -> Request:
        budget = self.sampling.max_new_tokens
        if room is not None and room < budget:
            return Request(prefix, room, False, context_words(room))
        return Request(prefix, budget, False, budget_words(budget))
