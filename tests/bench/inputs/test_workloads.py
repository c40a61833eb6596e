"""Workload construction: lengths, seeded determinism, the reasoning set-up."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.inputs.gsm8k import load_gsm8k
from app.bench.inputs.workloads import reasoning_workload, synthetic_workload
from app.core.errors import ConfigError

FIXTURE = Path(__file__).parent.parent.parent / "fixtures" / "gsm8k_small.jsonl"


def _synthetic(seed: int = 0, warmup: int = 1, vocab_size: int = 50):
    return synthetic_workload(
        input_len=64,
        output_len=16,
        num_prompts=3,
        reps=2,
        warmup=warmup,
        seed=seed,
        vocab_size=vocab_size,
    )


def test_synthetic_requests_have_exact_lengths_and_greedy_ignore_eos() -> None:
    workload = _synthetic()
    requests = [*workload.warmup, *(r for rep in workload.reps for r in rep)]
    assert len(workload.warmup) == 1
    assert [len(rep) for rep in workload.reps] == [3, 3]
    for request in requests:
        assert request.prompt is None
        assert request.input_ids is not None and len(request.input_ids) == 64
        assert all(0 <= token < 50 for token in request.input_ids)
        assert request.sampling_params == {
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": 1,
            "max_new_tokens": 16,
            "ignore_eos": True,
        }
    assert not workload.natural_stop


def test_synthetic_prompts_are_distinct_so_no_prefix_is_cached() -> None:
    workload = _synthetic()
    ids = [r.input_ids for r in (*workload.warmup, *workload.reps[0], *workload.reps[1])]
    assert len(set(ids)) == len(ids)


def test_synthetic_is_deterministic_per_seed_and_independent_of_warmup() -> None:
    assert _synthetic(seed=1) == _synthetic(seed=1)
    assert _synthetic(seed=1).reps != _synthetic(seed=2).reps
    assert _synthetic(warmup=0).reps == _synthetic(warmup=3).reps


def test_reasoning_uses_five_shots_and_the_questions_after_them() -> None:
    items = load_gsm8k(FIXTURE)
    workload = reasoning_workload(
        items, num_prompts=2, reps=3, warmup=1, max_new_tokens=512, dataset="gsm8k.jsonl"
    )
    rep = workload.reps[0]
    assert [r.expected for r in rep] == [items[5].answer, items[6].answer]
    assert workload.reps == (rep, rep, rep)
    for request, item in zip(rep, items[5:], strict=False):
        assert request.input_ids is None
        assert request.prompt is not None
        assert request.prompt.count("Question:") == 6
        assert request.prompt.endswith(f"Question: {item.question}\nAnswer:")
    assert rep[0].sampling_params == {
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 29,
        "max_new_tokens": 512,
        "stop": ["Question:"],
    }
    assert workload.natural_stop
    assert workload.warmup == (rep[0],)


def test_reasoning_takes_at_most_the_questions_there_are() -> None:
    workload = reasoning_workload(
        load_gsm8k(FIXTURE), num_prompts=50, reps=1, warmup=0, max_new_tokens=8, dataset="d"
    )
    assert len(workload.reps[0]) == 3


def test_reasoning_needs_a_question_after_the_shots() -> None:
    items = load_gsm8k(FIXTURE)[:5]
    with pytest.raises(ConfigError, match="needs more than 5 items"):
        reasoning_workload(items, num_prompts=1, reps=1, warmup=0, max_new_tokens=8, dataset="d")


def test_describe_records_the_shape_but_no_tokens() -> None:
    assert _synthetic().describe() == {
        "name": "synthetic",
        "input_len": 64,
        "output_len": 16,
        "seed": 0,
        "vocab_size": 50,
        "num_prompts": 3,
        "reps": 2,
        "warmup": 1,
        "sampling": {
            "temperature": 0.0,
            "top_p": 1.0,
            "top_k": 1,
            "max_new_tokens": 16,
            "ignore_eos": True,
        },
        "chat_template": None,
    }
