"""`ReplyUsage`: what one reply used and how its speculation went, as its backend reported it.

Every backend builds it once, at its edge, from what its source sends (SGLang's final
statistics in-process, the server's usage and spec details remotely, a trace on replay);
telemetry, storage, the bench and the proof's warm-up read only this record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ReplyUsage:
    """Token counts and speculative-decoding statistics of one reply."""

    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens served from SGLang's prefix cache, when it reported them."""
    verify_rounds: int = 0
    """Speculative verify rounds (SGLang's `spec_verify_ct`); 0 without speculation."""
    correct_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: tuple[int, ...] | None = None
    """Verify rounds that accepted 0, 1, 2, ... drafts, when SGLang reports it."""

    @property
    def accept_length(self) -> float | None:
        """Tokens per verify round, or None without speculation.

        SGLang's own convention: it counts the bonus token and the prefill token, so it
        slightly overstates very short replies.
        """
        return self.completion_tokens / self.verify_rounds if self.verify_rounds > 0 else None

    @property
    def accept_rate(self) -> float | None:
        """Share of drafted tokens the target accepted, or None when none were drafted."""
        return self.correct_drafts / self.proposed_drafts if self.proposed_drafts > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "verify_rounds": self.verify_rounds,
            "correct_drafts": self.correct_drafts,
            "proposed_drafts": self.proposed_drafts,
            "accept_histogram": (
                list(self.accept_histogram) if self.accept_histogram is not None else None
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplyUsage:
        """Rebuild a record written by `to_dict`.

        Raises:
            TypeError, ValueError: `data` is not such a record.
        """
        histogram = data.get("accept_histogram")
        cached = data.get("cached_tokens")
        return cls(
            completion_tokens=int(data["completion_tokens"]),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            cached_tokens=int(cached) if cached is not None else None,
            verify_rounds=int(data.get("verify_rounds") or 0),
            correct_drafts=int(data.get("correct_drafts") or 0),
            proposed_drafts=int(data.get("proposed_drafts") or 0),
            accept_histogram=tuple(int(n) for n in histogram) if histogram else None,
        )
