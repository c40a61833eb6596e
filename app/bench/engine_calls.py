"""What only measurements ask of the in-process engine: timed raw requests, the profiler."""

from __future__ import annotations

import time
from typing import Any

from app.backend.engine.engine import EngineBackend
from app.backend.protocol import TimedGeneration
from app.backend.sglang_meta import chunk_ending, chunk_tokens


async def generate(
    backend: EngineBackend,
    *,
    sampling_params: dict[str, Any],
    input_ids: list[int] | None = None,
    prompt: str | None = None,
) -> TimedGeneration:
    """One streamed request from token ids or raw text, timed on the engine thread.

    Raises:
        BackendError: the engine is not running.
        EngineCrashed: SGLang's scheduler died before or during the request.
    """

    async def run(engine: Any) -> TimedGeneration:
        started = time.perf_counter()
        arrivals: list[float] = []
        chunk: dict[str, Any] = {}
        tokens = 0
        stream = await engine.async_generate(
            prompt=prompt, input_ids=input_ids, sampling_params=sampling_params, stream=True
        )
        async for chunk in stream:
            now = time.perf_counter()
            if (count := chunk_tokens(chunk)) > tokens:
                tokens = count
                arrivals.append(now)
        usage, finish = chunk_ending(chunk)
        return TimedGeneration(
            started, arrivals, chunk.get("text", ""), usage, finish, time.perf_counter()
        )

    return await backend.on_engine(run)


async def call_tokenizer_manager(backend: EngineBackend, method: str, *args: Any) -> Any:
    """Await `engine.tokenizer_manager.<method>(*args)` on the engine loop (the profiler's
    `start_profile` and `stop_profile`).

    Raises:
        BackendError: the engine is not running.
        EngineCrashed: SGLang's scheduler died before or during the call.
    """
    return await backend.on_engine(lambda engine: getattr(engine.tokenizer_manager, method)(*args))
