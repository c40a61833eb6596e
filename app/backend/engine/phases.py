"""The thinking's budget, kept apart from the answer's ("budget forcing"), in-process.

A reply that thinks runs as up to two requests on SGLang's engine:

1. the thinking: from the prompt, at most the thinking budget (or the room left in the
   context), ended early by `</think>` (a stop token);
2. the answer: from the prompt, the thinking and `</think>` (the model's own or, when the
   thinking reached its budget, appended here), at most the answer's budget
   (`Sampling.max_new_tokens`) or the room left.

The second request's prompt is the first's plus its output, so SGLang's prefix cache serves
most of it. SGLang 0.5.23's own mechanism (`ThinkingBudgetLogitProcessor`, a custom logit
processor) needs `--enable-custom-logit-processor` and forces `</think>` through the logits
of each request; two plain requests need no server flag, work the same on the in-process
engine and with any speculative algorithm, and keep the answer's budget exact.

A reply that does not think (thinking off, or continuing an answer) is one request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.core.chat import budget_words, context_words


@dataclass(frozen=True, slots=True)
class Phase:
    """One request of a reply."""

    name: str
    """`first` or `answer` (the answer after the thinking: its own request)."""
    input_ids: list[int]
    max_new_tokens: int
    thinking: bool
    """The request starts inside the thinking."""
    limit: str
    """What its `max_new_tokens` is, in words: the reply's `ReplyDone.cut_by` if it ends
    the reply by length."""
    stop_token_ids: tuple[int, ...] = ()
    by_budget: bool = False
    """Its `max_new_tokens` is the thinking budget (not the room left in the context)."""


@dataclass(frozen=True, slots=True)
class ReplyPlan:
    """What a reply may use: its prompt ids and budgets, from the tokenizer (reply.py)."""

    input_ids: list[int]
    thinks: bool
    """The reply starts inside its thinking (thinking on, or continuing the thinking)."""
    thinking_budget: int | None
    """At most this many thinking tokens (None: up to the room left)."""
    answer_budget: int
    room: int
    """Tokens left in the context after the prompt."""
    end_think: list[int]
    """`</think>`'s token ids."""

    def first_phase(self) -> Phase:
        """The reply's first request: the thinking, or the answer when it does not think."""
        if not self.thinks:
            return answer_phase("first", self.input_ids, self.answer_budget, self.room)
        budget = self.thinking_budget
        if budget is not None and budget < self.room:
            limit, tokens = f"the thinking budget of {budget:,} tokens", budget
        else:
            limit, tokens = context_words(self.room), self.room
        stop = tuple(self.end_think) if len(self.end_think) == 1 else ()
        return Phase("first", self.input_ids, tokens, True, limit, stop, tokens != self.room)


def answer_phase(name: str, input_ids: list[int], budget: int, room: int) -> Phase:
    """A request of the answer alone: its budget, or the room left if that is less."""
    if budget <= room:
        return Phase(name, input_ids, budget, False, budget_words(budget))
    return Phase(name, input_ids, room, False, context_words(room))


def next_phase(
    plan: ReplyPlan,
    done: Phase,
    meta: Mapping[str, Any],
    output_ids: list[int],
    answered: bool,
) -> Phase | None:
    """The request after `done` (its final `meta_info`, its output ids, whether its text
    reached the answer), or None: the reply has ended.

    The answer gets its own request after a thinking that ended on `</think>` (the stop
    token), or that reached its budget (then `</think>` is appended)."""
    if not done.thinking or answered:
        return None
    reason = meta.get("finish_reason")
    kind = reason.get("type") if isinstance(reason, Mapping) else reason
    matched = reason.get("matched") if isinstance(reason, Mapping) else None
    closed = kind == "stop" and len(plan.end_think) == 1 and matched == plan.end_think[0]
    forced = kind == "length" and done.by_budget
    if not (closed or forced):
        return None
    if not output_ids:
        raise ValueError("the engine's stream carried no token ids to continue the reply from")
    thought = output_ids[:-1] if closed and output_ids[-1:] == plan.end_think else output_ids
    input_ids = done.input_ids + thought + plan.end_think
    room = plan.room - len(thought) - len(plan.end_think)
    if room < 1:
        return None
    return answer_phase("answer", input_ids, plan.answer_budget, room)
