"""Plain chat data shared by every layer: roles, messages, sampling settings."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


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


def reply_budget(requested: int, used: int, context: int) -> int:
    """New tokens a reply may take: what was asked, cut to the room left in the context.

    SGLang rejects a request whose prompt plus `max_new_tokens` exceeds the context, so a
    long conversation would otherwise fail outright instead of getting a shorter reply.
    """
    return min(requested, context - used)


def context_full(used: int, context: int) -> str:
    """The one-line error for a conversation that leaves no room for a reply."""
    return (
        f"the conversation ({used} tokens) fills the model's context ({context} tokens): "
        "start a new conversation or shorten the system prompt"
    )
