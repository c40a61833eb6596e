"""The requests a benchmark sends: synthetic fixed-length ones and GSM8K reasoning ones.

Every synthetic prompt is distinct (seeded per request), so no request reuses another's
prefix cache and each TTFT includes the full prefill. Reasoning prompts share the 5-shot
prefix, which stays cached after the first request, as a chat's system prompt would.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.bench.inputs.gsm8k import STOP, GsmItem, few_shot_prompt
from app.core.errors import ConfigError

LING_VOCAB_SIZE = 157_184
SHOTS = 5


@dataclass(frozen=True, slots=True)
class BenchRequest:
    """One request: token ids or raw text, its sampling parameters, its gold answer."""

    input_ids: tuple[int, ...] | None
    prompt: str | None
    sampling_params: Mapping[str, Any]
    expected: str | None = None
    """The gold answer to score the reply against (reasoning only)."""
    chat_template: Mapping[str, Any] | None = None
    """When set, `prompt` is one user message, sent through the model's chat template with
    these arguments (e.g. `{"enable_thinking": True}`); else `prompt` is sent as raw text."""


@dataclass(frozen=True, slots=True)
class Workload:
    """Warm-up requests, then the same measured set once per repetition."""

    name: str
    warmup: tuple[BenchRequest, ...]
    reps: tuple[tuple[BenchRequest, ...], ...]
    natural_stop: bool
    """True when replies may end on their own, so finish_reason `length` is a truncation."""
    params: Mapping[str, Any] = field(default_factory=dict)
    """What defines the workload besides the requests (lengths, seed, dataset), for the record."""

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description (no token ids or prompts)."""
        first = self.reps[0][0] if self.reps and self.reps[0] else None
        return {
            "name": self.name,
            **self.params,
            "num_prompts": len(self.reps[0]) if self.reps else 0,
            "reps": len(self.reps),
            "warmup": len(self.warmup),
            "sampling": dict(first.sampling_params) if first else {},
            "chat_template": dict(first.chat_template) if first and first.chat_template else None,
        }


def synthetic_workload(
    *,
    input_len: int,
    output_len: int,
    num_prompts: int,
    reps: int,
    warmup: int,
    seed: int = 0,
    vocab_size: int = LING_VOCAB_SIZE,
) -> Workload:
    """Random token ids of exactly `input_len`, greedy, exactly `output_len` new tokens."""
    sampling = {
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 1,
        "max_new_tokens": output_len,
        "ignore_eos": True,
    }

    def request(label: str) -> BenchRequest:
        # A string seed is hashed with SHA-512: stable across runs and Python versions.
        rng = random.Random(f"synthetic/{seed}/{label}")
        ids = tuple(rng.randrange(vocab_size) for _ in range(input_len))
        return BenchRequest(input_ids=ids, prompt=None, sampling_params=sampling)

    return Workload(
        name="synthetic",
        warmup=tuple(request(f"warmup{i}") for i in range(warmup)),
        reps=tuple(tuple(request(f"rep{r}/{i}") for i in range(num_prompts)) for r in range(reps)),
        natural_stop=False,
        params={
            "input_len": input_len,
            "output_len": output_len,
            "seed": seed,
            "vocab_size": vocab_size,
        },
    )


def reasoning_workload(
    items: list[GsmItem],
    *,
    num_prompts: int,
    reps: int,
    warmup: int,
    max_new_tokens: int,
    dataset: str,
) -> Workload:
    """5-shot chain-of-thought on the questions after the shots (at most `num_prompts`).

    Raises:
        ConfigError: the dataset has no question left after the shots.
    """
    shots, pool = items[:SHOTS], items[SHOTS:]
    if not pool:
        raise ConfigError(
            f"{dataset}: needs more than {SHOTS} items ({SHOTS} are the worked examples)"
        )
    sampling = {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 29,
        "max_new_tokens": max_new_tokens,
        "stop": list(STOP),
    }
    questions = [
        BenchRequest(
            input_ids=None,
            prompt=few_shot_prompt(shots, item.question),
            sampling_params=sampling,
            expected=item.answer,
        )
        for item in pool[:num_prompts]
    ]
    return Workload(
        name="reasoning",
        warmup=tuple(questions[i % len(questions)] for i in range(warmup)),
        reps=tuple(tuple(questions) for _ in range(reps)),
        natural_stop=True,
        params={"dataset": dataset, "shots": len(shots), "max_new_tokens": max_new_tokens},
    )
