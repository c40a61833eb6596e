"""A backend whose start compiles the kernels first (`prepare`) when they are not cached."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable, Sequence

from app.backend.engine.config import EngineConfig
from app.backend.firststart.prepare import CACHE_STAGE, PrepareSpec, heal_kernel_caches, prepare
from app.backend.protocol import BackendInfo, ChatBackend, LoadStage, ReplyEvent
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.proof_report import ProofReport


class PreparedBackend:
    """`inner` started after the prepare stage; everything else is `inner`'s."""

    def __init__(
        self,
        inner: ChatBackend,
        spec: Callable[[], PrepareSpec],
        make_backend: Callable[[EngineConfig], ChatBackend],
    ) -> None:
        """Args:
        inner: the real engine.
        spec: builds the prepare's spec at start time (it may read the checkpoint).
        make_backend: builds the dummy model's engine.
        """
        self._inner = inner
        self._spec = spec
        self._make_backend = make_backend

    @property
    def info(self) -> BackendInfo:
        return self._inner.info

    async def start(self) -> AsyncIterator[LoadStage]:
        """Invalid kernel-cache entries removed (a stage line each), the prepare's stage
        (skipped when its marker exists), then the real start."""
        healed = await asyncio.to_thread(heal_kernel_caches)
        for line in healed:
            yield LoadStage(CACHE_STAGE, False, 0.0, line)
        if healed:
            yield LoadStage(CACHE_STAGE, True, 0.0, f"{len(healed)} invalid entries removed")
        offset = 0.0
        spec = await asyncio.to_thread(self._spec)  # it may fetch the config from the hub
        async for stage in prepare(spec, self._make_backend):
            offset = stage.elapsed_s
            yield stage
        async for stage in self._inner.start():
            yield dataclasses.replace(stage, elapsed_s=stage.elapsed_s + offset)

    async def proof(self) -> ProofReport:
        return await self._inner.proof()

    def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        return self._inner.stream_reply(messages, sampling, thinking=thinking, partial=partial)

    async def stop_reply(self) -> None:
        await self._inner.stop_reply()

    async def shutdown(self) -> None:
        await self._inner.shutdown()
