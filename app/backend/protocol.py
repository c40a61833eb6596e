"""The narrow interface between the UI and whatever runs the model.

The UI holds a `ChatBackend` and nothing else: the in-process SGLang engine, a remote
SGLang server and a recorded trace all implement it. Events are plain frozen
dataclasses; timestamps are `time.perf_counter()` values taken when the event arrived.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from app.chat import ChatMessage, Sampling


@dataclass(frozen=True, slots=True)
class LoadStage:
    """A start-up stage began (`done=False`) or ended (`done=True`)."""

    name: str
    done: bool
    elapsed_s: float
    """Seconds since start-up began."""
    detail: str = ""
    bytes_done: int | None = None
    """For a download: bytes of the checkpoint on disk so far."""
    bytes_total: int | None = None


class Verdict(StrEnum):
    """The outcome of one proof line."""

    PASS = "pass"
    FAIL = "fail"
    OFF = "off"
    """Turned off by request, and verified off."""


@dataclass(frozen=True, slots=True)
class ProofLine:
    """One optimization's verdict with the evidence read from the running model."""

    key: str
    title: str
    verdict: Verdict
    evidence: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class ProofReport:
    """What the running model really is, line by line."""

    profile: str
    lines: tuple[ProofLine, ...]
    facts: Mapping[str, Any] = field(default_factory=dict)
    """The raw evidence the lines were judged from (JSON-serialisable)."""

    @property
    def ok(self) -> bool:
        """True when no line failed."""
        return all(line.verdict is not Verdict.FAIL for line in self.lines)

    @property
    def failed(self) -> tuple[ProofLine, ...]:
        """The lines that failed."""
        return tuple(line for line in self.lines if line.verdict is Verdict.FAIL)

    def summary(self) -> str:
        """One line, e.g. `stack: 8 pass, 0 fail, 0 off`."""
        counts = {v: sum(line.verdict is v for line in self.lines) for v in Verdict}
        return (
            f"{self.profile}: {counts[Verdict.PASS]} pass, "
            f"{counts[Verdict.FAIL]} fail, {counts[Verdict.OFF]} off"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "profile": self.profile,
            "lines": [asdict(line) for line in self.lines],
            "facts": dict(self.facts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProofReport:
        """Rebuild a report written by `to_dict`."""
        lines = tuple(
            ProofLine(**{**line, "verdict": Verdict(line["verdict"])}) for line in data["lines"]
        )
        return cls(profile=data["profile"], lines=lines, facts=dict(data.get("facts", {})))


@dataclass(frozen=True, slots=True)
class TextChunk:
    """New text of the reply: `answer` and `reasoning` are deltas, not cumulative."""

    answer: str
    reasoning: str
    completion_tokens: int
    """Tokens generated so far (cumulative, from SGLang's meta_info)."""
    at: float


@dataclass(frozen=True, slots=True)
class ReplyDone:
    """The reply ended; `meta_info` is SGLang's final one (accept statistics live here)."""

    finish_reason: str
    """`stop`, `length` or `abort`."""
    meta_info: Mapping[str, Any]
    at: float


@dataclass(frozen=True, slots=True)
class ReplyError:
    """The reply broke off; what arrived before stays valid."""

    message: str
    at: float


ReplyEvent = TextChunk | ReplyDone | ReplyError


@dataclass(frozen=True, slots=True)
class TimedGeneration:
    """One raw (non-chat) request streamed to its end, for benchmarks."""

    started_at: float
    """perf_counter() just before the request was submitted."""
    arrivals: Sequence[float]
    """perf_counter() of every streamed chunk that carried new tokens, in order."""
    text: str
    """The whole generated text (not a delta)."""
    meta_info: Mapping[str, Any]
    """SGLang's final meta_info: completion_tokens, finish_reason, spec_verify_ct, ..."""
    ended_at: float
    """perf_counter() when the stream ended."""


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What the UI shows about the model side and stores with each reply."""

    kind: str
    """`engine`, `server` or `replay`."""
    model: str
    sglang_version: str
    profile: str
    speculative: bool
    """True when speculative decoding is meant to be on (accept length is meaningful)."""
    context_length: int | None = None
    """The model's context in tokens, once the backend knows it (after start or a request)."""


class ChatBackend(Protocol):
    """Everything the UI may ask of the model side."""

    @property
    def info(self) -> BackendInfo:
        """Static facts about this backend."""
        ...

    def start(self) -> AsyncIterator[LoadStage]:
        """Load the model, yielding stages; raises `BackendError` on failure."""
        ...

    async def proof(self) -> ProofReport:
        """The proof report of the loaded model (call after `start` finished)."""
        ...

    def stream_reply(
        self, messages: Sequence[ChatMessage], sampling: Sampling
    ) -> AsyncIterator[ReplyEvent]:
        """Generate a reply; the last event is a `ReplyDone` or a `ReplyError`."""
        ...

    async def stop_reply(self) -> None:
        """Abort the reply being generated, if any; its stream then ends with `abort`."""
        ...

    async def shutdown(self) -> None:
        """Stop the model side and every process it started."""
        ...
