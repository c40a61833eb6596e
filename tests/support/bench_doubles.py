"""Test doubles for the benchmark: a scripted engine and a factory that starts them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.bench.protocol import BenchSample
from app.core.reply_usage import ReplyUsage


def sample(
    *,
    ttft: float,
    tpot: float,
    tokens: int,
    verify_rounds: int | None = None,
    text: str = "",
    finish: str = "length",
    prompt_tokens: int = 4,
    histogram: tuple[int, ...] | None = None,
) -> BenchSample:
    """A reply that started at 0, first token at `ttft`, then one token every `tpot`."""
    usage = ReplyUsage(
        completion_tokens=tokens,
        prompt_tokens=prompt_tokens,
        verify_rounds=verify_rounds or 0,
        accept_histogram=histogram,
    )
    end = ttft + tpot * (tokens - 1)
    return BenchSample(
        started_at=0.0,
        arrivals=[ttft, end],
        text=text,
        usage=usage,
        finish_reason=finish,
        ended_at=end,
    )


@dataclass
class ScriptedEngineDouble:
    """Answers each generate() with the next scripted sample (or raises the scripted error)."""

    profile: str
    script: list[BenchSample | Exception]
    journal: list[str]
    """Shared with the factory: start, generate and shutdown events in order."""
    facts: Mapping[str, Any] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def generate(
        self,
        *,
        input_ids: list[int] | None,
        prompt: str | None,
        sampling_params: dict[str, Any],
        chat_template: Mapping[str, Any] | None = None,
    ) -> BenchSample:
        self.journal.append(f"generate {self.profile}")
        self.calls.append(
            {
                "input_ids": input_ids,
                "prompt": prompt,
                "sampling_params": sampling_params,
                "chat_template": chat_template,
            }
        )
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    def describe(self) -> dict[str, Any]:
        return dict(self.facts)

    async def shutdown(self) -> None:
        self.journal.append(f"shutdown {self.profile}")


@dataclass
class EngineFactoryDouble:
    """Starts the engine scripted for a profile, or raises the error scripted for it."""

    engines: Mapping[str, ScriptedEngineDouble | Exception]
    journal: list[str]

    async def __call__(self, profile: str) -> ScriptedEngineDouble:
        self.journal.append(f"start {profile}")
        engine = self.engines[profile]
        if isinstance(engine, Exception):
            raise engine
        return engine
