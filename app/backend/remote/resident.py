"""ResidentBackend: the chat on the resident engine (`keep_engine`), through its HTTP API.

A freshly started engine is waited for (its state file says when it proved itself); then
the chat attaches as the remote client does: the server's proof re-checked line by line and
a warm-up reply measured for the accept length. Quitting leaves the engine loaded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from app.backend.protocol import BackendInfo, LoadStage, ReplyEvent
from app.backend.remote.remote import RemoteBackend
from app.backend.resident import process
from app.backend.resident.lock import AttachLock
from app.backend.resident.state import ResidentState, read_state
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.errors import BackendError, EngineCrashed
from app.core.proof_report import ProofReport

KIND = "resident"
POLL_S = 0.25
SHOW_EVERY_S = 5.0
"""How often the wait for a loading engine shows the last line of its log."""


class ResidentBackend:
    """A `ChatBackend` (`kind="resident"`) on the resident engine of process `pid`."""

    def __init__(
        self,
        folder: Path,
        pid: int,
        lock: AttachLock,
        *,
        log_file: Path,
        profile: str,
        min_accept_length: float,
        server_wait: float,
    ) -> None:
        self.folder = folder
        self.pid = pid
        self.log_file = log_file
        self._lock = lock
        self._profile = profile
        self._min_accept_length = min_accept_length
        self._server_wait = server_wait
        self._remote: RemoteBackend | None = None
        state = read_state(folder)
        self.attached = state is not None and state.pid == pid and state.ready
        """True when the engine was loaded already: the chat attaches, nothing loads."""

    @property
    def info(self) -> BackendInfo:
        if self._remote is not None:
            return dataclasses.replace(self._remote.info, kind=KIND)
        return BackendInfo(KIND, "", "", self._profile, speculative=False)

    async def start(self) -> AsyncIterator[LoadStage]:
        """Wait for the engine to be loaded, then attach: server info, warm-up, proof."""
        began = time.perf_counter()
        state = read_state(self.folder)
        if not self.attached:
            yield LoadStage("resident engine", False, 0.0, f"loading (pid {self.pid})")
            shown = time.perf_counter()
            while (state := read_state(self.folder)) is None or not (
                state.pid == self.pid and state.ready
            ):
                if not process.alive(self.pid):
                    raise EngineCrashed(
                        f"the resident engine (pid {self.pid}) stopped while loading: "
                        f"{last_line(self.log_file)} (its log: {self.log_file})"
                    )
                if time.perf_counter() - shown >= SHOW_EVERY_S:
                    shown = time.perf_counter()
                    elapsed = shown - began
                    yield LoadStage("resident engine", False, elapsed, last_line(self.log_file))
                await asyncio.sleep(POLL_S)
            elapsed = time.perf_counter() - began
            yield LoadStage("resident engine", True, elapsed, f"loaded, pid {self.pid}")
        assert state is not None
        self._remote = self._attach(state)
        async for stage in self._remote.start():
            yield dataclasses.replace(stage, elapsed_s=time.perf_counter() - began)

    def _attach(self, state: ResidentState) -> RemoteBackend:
        try:
            key = state.key()
        except OSError as exc:
            raise BackendError(
                f"the resident engine's key {state.key_file}: {exc.strerror}"
            ) from None
        return RemoteBackend(
            state.url,
            api_key=key,
            min_accept_length=self._min_accept_length,
            profile=self._profile,
            server_wait=self._server_wait,
        )

    async def proof(self) -> ProofReport:
        if self._remote is None:
            raise BackendError("proof() needs start() to have reached the proof stage")
        return await self._remote.proof()

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        if self._remote is None:
            raise BackendError("stream_reply() needs start() first")
        async for event in self._remote.stream_reply(
            messages, sampling, thinking=thinking, partial=partial
        ):
            yield event

    async def stop_reply(self) -> None:
        if self._remote is not None:
            await self._remote.stop_reply()

    async def shutdown(self) -> None:
        """Stop a reply in flight on the engine, let go of it; the engine stays loaded."""
        try:
            if self._remote is not None:
                await self._remote.stop_reply()
                await self._remote.shutdown()
        finally:
            self._lock.release()


def last_line(log_file: Path, limit: int = 160) -> str:
    """The log's last non-empty line, shortened; '' when there is none."""
    try:
        with log_file.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - 8192))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    line = next((" ".join(x.split()) for x in reversed(lines) if x.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"
