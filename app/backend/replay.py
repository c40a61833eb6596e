"""Recorded sessions: `RecordingBackend` writes a trace, `ReplayBackend` plays it back (the
trace file: `trace`)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from app.backend.draft import from_facts
from app.backend.protocol import (
    BackendInfo,
    ChatBackend,
    LoadStage,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
)
from app.backend.trace import (
    TRACE_FORMAT,
    TRACE_VERSION,
    event_from_dict,
    event_to_dict,
    info_from_dict,
    read_trace,
    recorded_info,
)
from app.backend.wire import chat_messages
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.errors import BackendError, ExportError
from app.core.proof_report import ProofReport
from app.core.reply_usage import ReplyUsage
from app.files import private_dir, write_atomic

Clock = Callable[[], float]
"""Seconds on a monotonic clock (`time.perf_counter`)."""
Sleep = Callable[[float], Awaitable[object]]
"""Waits that many seconds on the same clock (`asyncio.sleep`)."""
MAX_STAGE_GAP_S: Final = 1.0
"""Replayed start-up never waits longer than this between two stages (loads take minutes)."""
MAX_START_S: Final = 6.0
"""Nor longer than this in all: a real load reports progress every half second or so."""
NO_CONTINUATION: Final = (
    "this recording cannot continue the reply: its next recorded reply is not a continuation"
)
DEMO_TRACE: Final = "h200-stack-known-answer.trace.json"
"""The trace shipped in assets/: `stack-recurrent` on the project's H200 (`--replay demo`)."""


def trace_path(name: str | Path) -> Path:
    """`name` as a path; `demo` is the shipped trace (installed, or in a source checkout)."""
    if str(name) != "demo":
        return Path(name)
    package = Path(__file__).resolve().parents[1]
    for folder in (package / "_assets", package.parent / "assets"):
        if (folder / DEMO_TRACE).is_file():
            return folder / DEMO_TRACE
    raise BackendError(f"the demo trace {DEMO_TRACE} is not installed with ling-chat")


class ReplayBackend:
    """A `ChatBackend` that plays a recorded trace in real time (or `speed` times faster).

    Successive requests play successive recorded replies, starting over after the last.
    Time is read from `clock` and waited for with `sleep` (the real ones by default). Each
    event is stamped with its recorded time (`at` = the request's start + its `t`), not the
    moment it is played, so a reply measures at its recorded speed at any `speed` and however
    late the event loop hands an event over.
    """

    def __init__(
        self,
        path: Path | str,
        *,
        speed: float = 1.0,
        clock: Clock = time.perf_counter,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self._path = Path(path)
        self._trace = read_trace(self._path)
        self._speed = speed
        self._clock = clock
        self._sleep = sleep
        self._next_reply = 0
        self._abort = asyncio.Event()
        info = info_from_dict(self._trace["info"])
        proof = self._trace["proof"]
        if info.draft is None and proof is not None:  # recorded before the draft was kept
            info = replace(info, draft=from_facts(proof.get("facts")))
        self._info = replace(info, kind="replay", replay_speed=speed)

    @property
    def info(self) -> BackendInfo:
        """The recorded backend's facts, with `kind == "replay"`."""
        return self._info

    @property
    def reply_count(self) -> int:
        """How many replies the trace holds."""
        return len(self._trace["replies"])

    async def start(self) -> AsyncIterator[LoadStage]:
        """Replay the recorded load stages, gaps capped (`MAX_STAGE_GAP_S`, `MAX_START_S`)."""
        stages = [LoadStage(**data) for data in self._trace["stages"]]
        gaps, previous = [], 0.0
        for stage in stages:
            gaps.append(min(max(0.0, stage.elapsed_s - previous) / self._speed, MAX_STAGE_GAP_S))
            previous = stage.elapsed_s
        shrink = min(1.0, MAX_START_S / sum(gaps)) if sum(gaps) > 0 else 1.0
        for stage, gap in zip(stages, gaps, strict=True):
            await self._sleep(gap * shrink)
            yield stage

    async def proof(self) -> ProofReport:
        """The recorded proof report."""
        if self._trace["proof"] is None:
            raise BackendError(f"{self._path}: the trace holds no proof report")
        return ProofReport.from_dict(self._trace["proof"])

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        """Play the next recorded reply with its recorded timing and time stamps; ignores
        the request but for `partial`: a continuation plays only when the next recorded
        reply is one (else a one-line error, and that reply stays next). A stop ends it at
        the recorded time reached."""
        started = self._clock()
        if not self._trace["replies"]:
            yield ReplyError(f"{self._path}: the trace holds no replies", at=started)
            return
        reply = self._trace["replies"][self._next_reply % self.reply_count]
        if partial is not None and "partial" not in reply.get("request", {}):
            yield ReplyError(NO_CONTINUATION, at=started)
            return
        self._next_reply += 1
        self._abort.clear()
        final = event_from_dict(reply["events"][-1], started) if reply["events"] else None
        prompt_tokens = final.usage.prompt_tokens if isinstance(final, ReplyDone) else 0
        completion_tokens = 0
        for data in reply["events"]:
            delay = started + data["t"] / self._speed - self._clock()
            if delay > 0:
                await self._wait_or_abort(delay)
            if self._abort.is_set():
                usage = ReplyUsage(completion_tokens=completion_tokens, prompt_tokens=prompt_tokens)
                reached = (self._clock() - started) * self._speed
                # never past the event not played: a late loop must not stretch the reply
                yield ReplyDone("abort", usage, at=started + min(reached, float(data["t"])))
                return
            event = event_from_dict(data, started + float(data["t"]))
            if isinstance(event, TextChunk):
                completion_tokens = event.completion_tokens
            yield event

    async def _wait_or_abort(self, seconds: float) -> None:
        """Wait `seconds`, or less if `stop_reply` comes first."""
        waits = [
            asyncio.ensure_future(self._sleep(seconds)),
            asyncio.create_task(self._abort.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    async def stop_reply(self) -> None:
        """End the reply being played with `finish_reason == "abort"`."""
        self._abort.set()

    async def shutdown(self) -> None:
        """Nothing to stop."""


class RecordingBackend:
    """Wraps any `ChatBackend` and records what passes through it to a trace file.

    The file is rewritten atomically after start-up, the proof and each finished reply,
    so a crash loses at most the reply in flight. A write that fails (a full disk) leaves
    the chat going and says why in `save_error` until a later write succeeds. Event times
    are kept relative to the request's send time on `clock`.
    """

    def __init__(
        self, inner: ChatBackend, path: Path | str, *, clock: Clock = time.perf_counter
    ) -> None:
        self.inner = inner
        """The backend recorded."""
        self._clock = clock
        self._path = Path(path)
        self._trace: dict[str, Any] = {
            "format": TRACE_FORMAT,
            "version": TRACE_VERSION,
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "info": recorded_info(inner.info),
            "stages": [],
            "proof": None,
            "replies": [],
        }
        self.save_error: str | None = None

    @property
    def info(self) -> BackendInfo:
        """The wrapped backend's facts."""
        return self.inner.info

    async def start(self) -> AsyncIterator[LoadStage]:
        """Pass the stages through, recording each; the trace is written when start-up ends."""
        async for stage in self.inner.start():
            self._trace["stages"].append(asdict(stage))
            yield stage
        self._trace["info"] = recorded_info(self.inner.info)  # the SGLang version is known now
        self._save()

    async def proof(self) -> ProofReport:
        """Pass the proof report through and record it."""
        report = await self.inner.proof()
        self._trace["proof"] = report.to_dict()
        self._save()
        return report

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        """Pass the reply through; once it has ended, record it and rewrite the trace."""
        started = self._clock()
        events: list[dict[str, Any]] = []
        request: dict[str, Any] = {
            "messages": chat_messages(messages),
            "sampling": asdict(sampling),
            "thinking": asdict(thinking),
        }
        if partial is not None:
            request["partial"] = asdict(partial)
        stream = self.inner.stream_reply(messages, sampling, thinking=thinking, partial=partial)
        async for event in stream:
            events.append(event_to_dict(event, started))
            if not isinstance(event, TextChunk):
                self._trace["replies"].append({"request": request, "events": events})
                self._save()
            yield event

    async def stop_reply(self) -> None:
        """Stop the wrapped backend's reply."""
        await self.inner.stop_reply()

    async def shutdown(self) -> None:
        """Shut the wrapped backend down."""
        await self.inner.shutdown()

    def _save(self) -> None:
        """Rewrite the trace; a failure is kept in `save_error`, never raised into the chat."""
        try:
            private_dir(self._path.parent)
            write_atomic(self._path, [json.dumps(self._trace, ensure_ascii=False)], replace=True)
        except ExportError as exc:
            self.save_error = str(exc)
        except OSError as exc:
            self.save_error = f"cannot write {self._path}: {exc.strerror}"
        else:
            self.save_error = None
