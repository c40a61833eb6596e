"""The published Spark protocols that `ling-chat bench --suite` reproduces.

- `nvidia`: NVIDIA's (`ly01325/Ling3-Flash-DGX-Spark`, the `results/gsm8k-1319-*-summary.json`
  files): the synthetic 32K-in / 2K-out rows, and GSM8K as the 1,319 test questions, 5-shot
  from the train split, T 0.6, top-p 0.95, top-k 29, at most 32,768 tokens, seed 42,
  thinking on.
- `recipes`: the second Spark recipe's (`0xBakeer/ling3-flash-spark`, `bench.py`) code,
  prose and random-8K workloads: every reply forced to 1,024 tokens, T 0.6, top-p 0.95,
  top-k 20, thinking off. Every request has its own seed, which tags its prompt's first
  words (or draws its token ids), so no two requests share a prefix-cache block.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence
from typing import Any

from app.bench.inputs.gsm8k import GsmItem, few_shot_prompt
from app.bench.inputs.workloads import (
    LING_VOCAB_SIZE,
    SHOTS,
    BenchRequest,
    Workload,
    synthetic_workload,
)
from app.core.errors import ConfigError

SUITES = ("nvidia", "recipes")
SYNTHETIC_IN, SYNTHETIC_OUT = 32_768, 2_048
GSM8K_SAMPLING = {
    "temperature": 0.6,
    "top_p": 0.95,
    "top_k": 29,
    "max_new_tokens": 32_768,
    "sampling_seed": 42,
}
THINKING_ON = {"enable_thinking": True}
THINKING_OFF = {"enable_thinking": False}
RECIPE_OUT = 1_024
RANDOM_IN = 8_192
RECIPE_SAMPLING = {
    "temperature": 0.6,
    "top_p": 0.95,
    "top_k": 20,
    "max_new_tokens": RECIPE_OUT,
    "min_new_tokens": RECIPE_OUT,
    "ignore_eos": True,
}
RECIPE_PROMPTS = {
    "code": "Write a complete, production-quality Python module implementing an LRU cache"
    " with a TTL per entry, thread safety, and an eviction callback. Include full"
    " docstrings, type hints, and a pytest suite covering expiry, eviction order, and"
    " concurrent access.",
    "prose": "Write a detailed, flowing essay of about 900 words on how tidal forces shaped"
    " the evolution of coastal ecosystems. Use full paragraphs and continuous prose, no"
    " bullet points or headings.",
}


def gsm8k_workload(
    test: Sequence[GsmItem], train: Sequence[GsmItem], *, questions: int | None, warmup: int
) -> Workload:
    """The test questions in order (the first `questions`, default all), each a user message
    with the first five train items as worked examples, thinking on.

    Raises:
        ConfigError: fewer than five train items, or no test question.
    """
    if len(train) < SHOTS or not test:
        raise ConfigError(
            f"GSM8K: needs {SHOTS} train items and a test question"
            f" (got {len(train)} and {len(test)})"
        )
    shots = list(train[:SHOTS])
    asked = [
        BenchRequest(
            input_ids=None,
            prompt=few_shot_prompt(shots, item.question),
            sampling_params=GSM8K_SAMPLING,
            expected=item.answer,
            chat_template=THINKING_ON,
        )
        for item in test[:questions]
    ]
    return Workload(
        name="gsm8k",
        warmup=tuple(asked[i % len(asked)] for i in range(warmup)),
        reps=(tuple(asked),),
        natural_stop=True,
        params={
            "what": f"{len(asked)} test questions, {SHOTS}-shot from train, T=0.6 top_p=0.95"
            " top_k=29, max 32768 tokens, seed 42, thinking on",
            "dataset": "openai/gsm8k main",
            "shots": SHOTS,
            "max_new_tokens": GSM8K_SAMPLING["max_new_tokens"],
        },
    )


def nvidia_suite(
    test: Sequence[GsmItem],
    train: Sequence[GsmItem],
    *,
    questions: int | None,
    num_prompts: int,
    reps: int,
    warmup: int,
    seed: int,
) -> list[Workload]:
    """The synthetic 32K-in / 2K-out rows, then GSM8K."""
    synthetic = synthetic_workload(
        input_len=SYNTHETIC_IN,
        output_len=SYNTHETIC_OUT,
        num_prompts=num_prompts,
        reps=reps,
        warmup=warmup,
        seed=seed,
    )
    return [synthetic, gsm8k_workload(test, train, questions=questions, warmup=warmup)]


def recipes_suite(
    *, num_prompts: int, reps: int, warmup: int, seed: int, vocab_size: int = LING_VOCAB_SIZE
) -> list[Workload]:
    """Code, prose and random 8K-in, 1,024 forced tokens; seeds `seed`, `seed + 1`, ... in
    send order, one per request across the whole suite."""

    def text(name: str, tag: int) -> BenchRequest:
        prompt = f"[req {tag}] {RECIPE_PROMPTS[name]}"
        return BenchRequest(None, prompt, RECIPE_SAMPLING, chat_template=THINKING_OFF)

    def random_ids(_: str, tag: int) -> BenchRequest:
        rng = random.Random(f"recipes/random/{tag}")
        ids = tuple(rng.randrange(vocab_size) for _ in range(RANDOM_IN))
        return BenchRequest(ids, None, RECIPE_SAMPLING)

    counter = itertools.count(seed)
    workloads = []
    for name, make, what in (
        ("code", text, "the code prompt"),
        ("prose", text, "the prose prompt"),
        ("random-8k", random_ids, f"{RANDOM_IN} random token ids"),
    ):
        warm = [next(counter) for _ in range(warmup)]
        measured = [[next(counter) for _ in range(num_prompts)] for _ in range(reps)]
        params: dict[str, Any] = {
            "what": f"{what}, {RECIPE_OUT} forced tokens, T=0.6 top_p=0.95 top_k=20,"
            " thinking off, a fresh seed per request",
            "output_len": RECIPE_OUT,
            "seeds": [*warm, *(tag for rep in measured for tag in rep)],
        }
        if name == "random-8k":
            params["input_len"] = RANDOM_IN
        workloads.append(
            Workload(
                name=name,
                warmup=tuple(make(name, tag) for tag in warm),
                reps=tuple(tuple(make(name, tag) for tag in rep) for rep in measured),
                natural_stop=False,
                params=params,
            )
        )
    return workloads
