"""Plain chat data shared by every layer: roles, messages, sampling settings."""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Final

from app.core.errors import ContextFull

MAX_TEXT_CHARS: Final = 1 << 20
"""The longest text of one message: 1,048,576 characters, the model's whole context
(262,144 tokens) at about 4 characters a token. A message past it could not be sent back
to the model in any conversation, while every reply ling-chat writes (131,072 tokens at
most) still fits. Typed text, imports and a server's reply are held to it. The chat's time
to open a message grows with its length."""


class Role(StrEnum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One turn of a conversation as the model sees it."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Sampling:
    """Sampling parameters sent with every request (the engine applies no defaults)."""

    temperature: float = 0.6
    top_p: float = 0.95
    top_k: int = 29
    max_new_tokens: int = 4096

    def as_sglang(self) -> dict[str, float | int]:
        """The `sampling_params` dict SGLang's generate API takes."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "max_new_tokens": self.max_new_tokens,
        }


@dataclass(frozen=True, slots=True)
class Thinking:
    """A chat's thinking: on or off and, when on, at most `budget` thinking tokens (None: no
    cap). The reply's `Sampling.max_new_tokens` is the answer's budget, on top of this."""

    enabled: bool = True
    budget: int | None = 2048

    def __post_init__(self) -> None:
        if self.budget is not None and not 1 <= self.budget <= MAX_THINKING_BUDGET:
            raise ValueError(
                f"a thinking budget is 1..{MAX_THINKING_BUDGET:,} tokens, not {self.budget!r}"
            )


MAX_THINKING_BUDGET: Final = 131072
"""The largest thinking budget: the longest reply ling-chat writes."""
DEFAULT_THINKING: Final = Thinking()
"""A chat's thinking unless set: on, at most 2,048 thinking tokens before the answer."""


@dataclass(frozen=True, slots=True)
class PartialReply:
    """A reply to continue: its thinking and answer so far (as stored).

    The reply is still thinking when it has thinking and no answer yet: continuing it
    continues the thinking; otherwise it continues the answer."""

    reasoning: str
    answer: str

    @property
    def thinking_open(self) -> bool:
        """True when the reply was cut or stopped inside its thinking."""
        return bool(self.reasoning) and not self.answer


def thinking_words(thinking: Thinking) -> str:
    """A chat's thinking in words: `thinking off`, `thinking up to 2,048 tokens`."""
    if not thinking.enabled:
        return "thinking off"
    if thinking.budget is None:
        return "thinking on"
    return f"thinking up to {thinking.budget:,} tokens"


def budget_words(tokens: int) -> str:
    """A reply cut by its budget: what the transcript says cut it."""
    return f"the reply budget of {tokens:,} tokens"


def context_words(tokens: int) -> str:
    """A reply cut by the end of the model's context."""
    return f"the room left in the model's context ({tokens:,} tokens)"


def fit_to_context(sampling: Sampling, used: int, context: int) -> Sampling:
    """`sampling` with its reply cut to the room left in the context.

    SGLang rejects a request whose prompt plus `max_new_tokens` exceeds the context, so a
    long conversation would otherwise fail outright instead of getting a shorter reply.

    Raises:
        ContextFull: `used` leaves no token for the reply.
    """
    room = context - used
    if room < 1:
        raise ContextFull(
            f"the conversation ({used} tokens) fills the model's context ({context} tokens): "
            "start a new conversation or shorten the system prompt"
        )
    return replace(sampling, max_new_tokens=min(sampling.max_new_tokens, room))
