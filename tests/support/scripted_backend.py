"""ScriptedBackendDouble: a test double of `ChatBackend` that plays scripted replies.

It never runs a model. Tests enqueue replies, can hold a reply mid-stream until the UI
stops it, and read back what the UI asked for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.backend.protocol import (
    BackendInfo,
    DraftShape,
    LoadStage,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
)
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.errors import BackendError
from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.core.reply_usage import ReplyUsage
from tests.support.clock import FakeClock


def passing_report() -> ProofReport:
    """A proof where the three optimizations are engaged."""
    return ProofReport(
        profile="stack",
        lines=(
            ProofLine(
                "humming", "Humming MoE kernels", Verdict.PASS, "43/43 MoE layers run humming"
            ),
            ProofLine("fp8_head", "FP8 LM head", Verdict.PASS, "lm_head weight float8_e4m3fn"),
            ProofLine("nextn", "NEXTN, shared head", Verdict.PASS, "draft lm_head is target's"),
        ),
    )


def failing_report() -> ProofReport:
    """A proof where the FP8 head is not engaged."""
    return ProofReport(
        profile="stack",
        lines=(
            ProofLine(
                "humming", "Humming MoE kernels", Verdict.PASS, "43/43 MoE layers run humming"
            ),
            ProofLine(
                "fp8_head",
                "FP8 LM head",
                Verdict.FAIL,
                "lm_head weight is bfloat16",
                fix="install the FP8 head patch (ling-chat doctor)",
            ),
            ProofLine("nextn", "NEXTN, shared head", Verdict.OFF, "turned off by --profile"),
        ),
    )


def long_failing_report() -> ProofReport:
    """A refused proof as long as the stack's: ten lines, each with its evidence and fix."""
    lines = tuple(
        ProofLine(
            f"lever{index}",
            f"Optimization number {index}",
            Verdict.FAIL,
            f"evidence read from the running model for line {index}",
            fix=f"the fix for line {index}",
        )
        for index in range(10)
    )
    return ProofReport(profile="stack", lines=lines)


def long_passing_report() -> ProofReport:
    """A passing proof as long as the stack's: ten lines with evidence over several lines."""
    measured = ", measured on the running model" * 4
    lines = tuple(
        replace(line, verdict=Verdict.PASS, evidence=f"{line.evidence}{measured}", fix="")
        for line in long_failing_report().lines
    )
    return ProofReport(profile="stack", lines=lines)


STAGES = (
    LoadStage("Loading weights", False, 0.0, "12 shards"),
    LoadStage("Loading weights", True, 41.5),
    LoadStage("Capturing CUDA graphs", False, 41.5),
    LoadStage("Capturing CUDA graphs", True, 52.0),
)


@dataclass
class ScriptedReply:
    """One reply: text chunks (answer, reasoning) then a final event."""

    chunks: list[tuple[str, str]]
    tokens_per_chunk: int = 3
    usage: dict[str, Any] = field(default_factory=dict)
    """Fields of the final `ReplyUsage` past the token counts (e.g. verify_rounds)."""
    finish_reason: str = "stop"
    cut_by: str = ""
    """With finish reason `length`: the limit named (`ReplyDone.cut_by`)."""
    error: str | None = None
    """End with this ReplyError instead of a ReplyDone."""
    raise_error: str | Exception | None = None
    """Raise a BackendError with this text (or this exception) instead of a final event."""
    hold_after: int | None = None
    """Pause after this many chunks until stop_reply() or release()."""
    step_s: float = 0.01
    """Time between chunks (the fake clock jumps it; a real clock waits it)."""


def answer_reply(*parts: str, reasoning: Sequence[str] = (), **options: Any) -> ScriptedReply:
    """A reply whose chunks are the reasoning parts, then the answer parts."""
    chunks = [("", r) for r in reasoning] + [(a, "") for a in parts]
    return ScriptedReply(chunks, **options)


class ScriptedBackendDouble:
    """Test double of `ChatBackend`: scripted stages, proof and replies."""

    def __init__(
        self,
        *,
        clock: FakeClock | Callable[[], float] | None = None,
        stages: Sequence[LoadStage] = STAGES,
        report: ProofReport | None = None,
        start_error: Exception | None = None,
        hold_start: bool = False,
        stop_error: BackendError | None = None,
        speculative: bool = True,
        kind: str = "engine",
    ) -> None:
        self.clock = clock or FakeClock()
        self.stages = tuple(stages)
        self.report = report or passing_report()
        self.start_error = start_error
        self.hold_start = hold_start
        self.stop_error = stop_error
        self.info = BackendInfo(
            kind,
            "inclusionAI/Ling-3.0-flash",
            "0.5.23",
            "stack",
            speculative,
            context_length=32768,
            draft=DraftShape(3, 4) if speculative else None,
        )
        self.replies: list[ScriptedReply] = []
        self.requests: list[tuple[tuple[ChatMessage, ...], Sampling]] = []
        self.thinking_asked: list[Thinking] = []
        self.partials: list[PartialReply | None] = []
        """Per request: the reply it continued, or None."""
        self.stop_calls = 0
        self.shutdown_calls = 0
        self.chunks_sent = 0
        self._stop = asyncio.Event()
        self._release = asyncio.Event()

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests."""
        self.replies.extend(replies)

    def release(self) -> None:
        """Let a held start or reply go on."""
        self._release.set()

    async def start(self) -> AsyncIterator[LoadStage]:
        for stage in self.stages:
            yield stage
        if self.hold_start:
            await self._release.wait()
        if self.start_error is not None:
            raise self.start_error

    async def proof(self) -> ProofReport:
        return self.report

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        self.requests.append((tuple(messages), sampling))
        self.thinking_asked.append(thinking)
        self.partials.append(partial)
        self._stop.clear()
        self._release.clear()
        if not self.replies:
            yield ReplyError("no scripted reply left", at=self.clock())
            return
        reply = self.replies.pop(0)
        tokens = 0
        for index, (answer, reasoning) in enumerate(reply.chunks):
            if reply.hold_after is not None and index == reply.hold_after:
                await self._held()
            if self._stop.is_set():
                usage = ReplyUsage(completion_tokens=tokens, prompt_tokens=10)
                yield ReplyDone("abort", usage, self.clock())
                return
            await self._tick(reply.step_s)
            tokens += reply.tokens_per_chunk
            self.chunks_sent += 1
            yield TextChunk(answer, reasoning, tokens, self.clock())
        await self._tick(reply.step_s)
        if isinstance(reply.raise_error, Exception):
            raise reply.raise_error
        if reply.raise_error is not None:
            raise BackendError(reply.raise_error)
        if reply.error is not None:
            yield ReplyError(reply.error, self.clock())
            return
        usage = ReplyUsage(**{"prompt_tokens": 10, "completion_tokens": tokens, **reply.usage})
        yield ReplyDone(reply.finish_reason, usage, self.clock(), reply.cut_by)

    async def _tick(self, seconds: float) -> None:
        """Let time pass: the fake clock jumps, a real one is waited for."""
        if isinstance(self.clock, FakeClock):
            self.clock.advance(seconds)
            await asyncio.sleep(0)
        else:
            await asyncio.sleep(seconds)

    async def _held(self) -> None:
        waits = [
            asyncio.ensure_future(self._stop.wait()),
            asyncio.ensure_future(self._release.wait()),
        ]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()

    async def stop_reply(self) -> None:
        self.stop_calls += 1
        if self.stop_error is not None:
            raise self.stop_error
        self._stop.set()

    async def shutdown(self) -> None:
        self.shutdown_calls += 1
