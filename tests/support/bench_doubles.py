"""Test doubles for the benchmark: a scripted engine and a factory that starts them."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
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
    busy_us_per_token: float = 100.0
    """The GPU time its profiler's trace gives each token generated while it runs."""
    profiling: Path | None = None
    profiled_tokens: list[int] = field(default_factory=list)

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
        if self.profiling is not None:
            self.profiled_tokens.append(step.usage.completion_tokens)
        return step

    async def start_profile(self, folder: Path) -> None:
        self.journal.append(f"start_profile {self.profile}")
        self.profiling, self.profiled_tokens = folder, []

    async def stop_profile(self) -> None:
        self.journal.append(f"stop_profile {self.profile}")
        assert self.profiling is not None, "stop_profile without start_profile"
        write_trace(
            self.profiling / "host-0.trace.json.gz", self.profiled_tokens, self.busy_us_per_token
        )
        self.profiling = None

    def describe(self) -> dict[str, Any]:
        return dict(self.facts)

    async def shutdown(self) -> None:
        self.journal.append(f"shutdown {self.profile}")


@dataclass
class PacedEngineDouble(ScriptedEngineDouble):
    """Answers every request with the `max_new_tokens` it asks for, `tpot` seconds a token
    after a `ttft`, `accept` tokens a verify round (no script)."""

    tpot: float = 0.002
    ttft: float = 0.05
    accept: int = 4

    async def generate(self, **request: Any) -> BenchSample:  # type: ignore[override]
        tokens = int(request["sampling_params"]["max_new_tokens"])
        rounds = -(-tokens // self.accept)
        self.script.append(
            sample(ttft=self.ttft, tpot=self.tpot, tokens=tokens, verify_rounds=rounds)
        )
        return await super().generate(**request)


def write_trace(path: Path, tokens: Sequence[int], busy_us_per_token: float) -> None:
    """A Chrome trace as SGLang's profiler writes it: for each request's `tokens`, one kernel
    a token, back to back, requests 1 ms apart, a CPU event over all (not GPU work)."""
    events: list[dict[str, Any]] = [{"cat": "cpu_op", "name": "loop", "ts": 0, "dur": 10**9}]
    ts = 0.0
    for count in tokens:
        for _ in range(count):
            events.append({"cat": "kernel", "name": "k", "ts": ts, "dur": busy_us_per_token})
            ts += busy_us_per_token
        ts += 1000.0
    with gzip.open(path, "wt", encoding="utf-8") as file:
        json.dump({"traceEvents": events}, file)


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
