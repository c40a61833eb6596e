"""The narrow interface between the UI and whatever runs the model.

The UI holds a `ChatBackend` and nothing else: the in-process SGLang engine, a remote
SGLang server and a recorded trace all implement it. Events are plain frozen
dataclasses; timestamps are `time.perf_counter()` values taken when the event arrived. A
replay stamps each event with the time it arrived in the recording (seconds after the
request, added to the replayed request's send time), whatever speed it plays at: the
metrics measure every reply from these stamps, so a replay measures as recorded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.proof_report import ProofReport
from app.core.reply_usage import ReplyUsage


@dataclass(frozen=True, slots=True)
class LoadStage:
    """A start-up stage began (`done=False`) or ended (`done=True`)."""

    name: str
    done: bool
    elapsed_s: float
    """Seconds since start-up began."""
    detail: str = ""
    bytes_done: int | None = None
    """For a download: bytes of the checkpoint on disk so far; for the weight load: bytes
    of its tensors read so far (of `bytes_total`)."""
    bytes_total: int | None = None


@dataclass(frozen=True, slots=True)
class TextChunk:
    """New text of the reply: `answer` and `reasoning` are deltas, not cumulative."""

    answer: str
    reasoning: str
    completion_tokens: int
    """Tokens generated so far (cumulative)."""
    at: float


@dataclass(frozen=True, slots=True)
class ReplyDone:
    """The reply ended; `usage` holds its token counts and accept statistics."""

    finish_reason: str
    """`stop`, `length` or `abort`."""
    usage: ReplyUsage
    at: float
    cut_by: str = ""
    """With `length`: the limit the reply reached, in words (`app.core.chat.budget_words`,
    `context_words`); empty when the backend cannot tell (the reply budget asked for)."""


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
    usage: ReplyUsage
    finish_reason: str | None
    """`stop`, `length` or `abort`; None when the stream ended without one."""
    ended_at: float
    """perf_counter() when the stream ended."""


@dataclass(frozen=True, slots=True)
class DraftShape:
    """The draft depth in use: what one speculative round drafts and the target verifies."""

    steps: int
    """Draft steps per round (SGLang's `speculative_num_steps`; 1 for a block draft)."""
    verify_tokens: int
    """Tokens the target verifies per round (`speculative_num_draft_tokens`)."""
    block: int | None = None
    """Tokens a block draft (DSpark) drafts in its one step; None for a step draft (NEXTN)."""


@dataclass(frozen=True, slots=True)
class BackendInfo:
    """What the UI shows about the model side and stores with each reply."""

    kind: str
    """`engine` (in-process), `resident` (`keep_engine`), `server` or `replay`."""
    model: str
    sglang_version: str
    profile: str
    speculative: bool
    """True when speculative decoding is meant to be on (accept length is meaningful)."""
    context_length: int | None = None
    """The model's context in tokens, once the backend knows it (after start or a request)."""
    draft: DraftShape | None = None
    """The draft depth in use, once the backend knows it; None without speculation."""
    replay_speed: float | None = None
    """How many times faster than recorded a replay plays (1.0: as recorded); None when the
    backend is not a replay."""


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
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        """Generate a reply; the last event is a `ReplyDone` or a `ReplyError`.

        `thinking`: on or off, and the thinking's budget (the answer keeps
        `sampling.max_new_tokens`). `partial`: a cut-off or stopped reply to continue; the
        events then carry only the new text, their token counts and usage only the new
        tokens. A backend that cannot continue it ends in a one-line `ReplyError`."""
        ...

    async def stop_reply(self) -> None:
        """Abort the reply being generated, if any; its stream then ends with `abort`."""
        ...

    async def shutdown(self) -> None:
        """Stop the model side and every process it started."""
        ...
