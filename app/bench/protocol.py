"""The narrow engine interface the benchmark drives, and what one request returns.

The real implementation wraps the in-process SGLang engine (`app.backend.engine.engine`);
tests drive the runner with a scripted double. Timestamps are `time.perf_counter()`
values taken by the engine adapter as the stream is consumed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from app.backend.protocol import TimedGeneration

BenchSample = TimedGeneration
"""One finished request, timed on the client side of the stream."""


class BenchEngine(Protocol):
    """A started engine serving one request at a time."""

    async def generate(
        self,
        *,
        input_ids: list[int] | None,
        prompt: str | None,
        sampling_params: dict[str, Any],
        chat_template: Mapping[str, Any] | None = None,
    ) -> BenchSample:
        """Stream one request to the end; exactly one of `input_ids` and `prompt` is set.

        `prompt` is raw text, sent without a chat template, unless `chat_template` is
        given: then `prompt` is one user message rendered by the model's chat template
        with those arguments. `sampling_params` is passed to SGLang unchanged.

        Raises:
            BackendError: the request failed (it is recorded as an error, the run goes on).
        """
        ...

    def describe(self) -> dict[str, Any]:
        """JSON-ready facts about the running engine.

        Keys: `config` (the SGLang server arguments and versions that matter; a peer's,
        `bench --peer`, also says under `peer` what it runs),
        `proof` (`ProofReport.to_dict()`, or None), and `model_config` (the checkpoint's
        config.json as a dict, for the roofline; None when unknown).
        """
        ...

    async def start_profile(self, folder: Path) -> None:
        """Start SGLang's torch profiler (GPU activities only), its traces going to `folder`.

        Raises:
            BackendError: the engine refused (one line).
        """
        ...

    async def stop_profile(self) -> None:
        """Stop the profiler once its trace is written.

        Raises:
            BackendError: the engine refused (one line).
        """
        ...

    async def shutdown(self) -> None:
        """Stop the engine and free the GPU for the next profile."""
        ...


EngineFactory = Callable[[str], Awaitable[BenchEngine]]
"""Profile name -> a started, proven engine for that profile."""
