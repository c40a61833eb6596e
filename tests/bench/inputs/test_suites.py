"""The published protocols' plans: NVIDIA's rows and GSM8K, the second recipe's workloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.bench.inputs.gsm8k import load_gsm8k
from app.bench.inputs.suites import nvidia_suite, recipes_suite
from app.core.errors import ConfigError

FIXTURES = Path(__file__).parent.parent.parent / "fixtures"
TEST = load_gsm8k(FIXTURES / "gsm8k_small.jsonl")
TRAIN = load_gsm8k(FIXTURES / "gsm8k_train_small.jsonl")


def _nvidia(questions: int | None = None, warmup: int = 1):
    return nvidia_suite(
        TEST, TRAIN, questions=questions, num_prompts=2, reps=2, warmup=warmup, seed=0
    )


def test_nvidia_runs_the_32k_in_2k_out_rows_then_gsm8k() -> None:
    synthetic, gsm8k = _nvidia()
    assert synthetic.name == "synthetic" and gsm8k.name == "gsm8k"
    first = synthetic.reps[0][0]
    assert first.input_ids is not None and len(first.input_ids) == 32768
    assert first.sampling_params["max_new_tokens"] == 2048
    assert first.sampling_params["ignore_eos"] is True
    assert [len(rep) for rep in synthetic.reps] == [2, 2]


def test_gsm8k_asks_every_test_question_once_with_the_published_sampling() -> None:
    gsm8k = _nvidia()[1]
    assert len(gsm8k.reps) == 1  # every question once, whatever --reps says
    asked = gsm8k.reps[0]
    assert [r.expected for r in asked] == [item.answer for item in TEST]
    for request, item in zip(asked, TEST, strict=True):
        assert request.sampling_params == {
            "temperature": 0.6,
            "top_p": 0.95,
            "top_k": 29,
            "max_new_tokens": 32768,
            "sampling_seed": 42,
        }
        assert request.chat_template == {"enable_thinking": True}
        assert request.prompt is not None and request.input_ids is None
        assert request.prompt.endswith(f"Question: {item.question}\nAnswer:")
    assert gsm8k.natural_stop
    assert gsm8k.describe()["chat_template"] == {"enable_thinking": True}


def test_gsm8k_shots_come_from_the_train_split_not_the_test_questions() -> None:
    prompt = _nvidia()[1].reps[0][0].prompt
    assert prompt is not None
    assert prompt.count("Question: ") == 6
    for shot in TRAIN:
        assert f"Question: {shot.question}\nAnswer: {shot.solution} The answer is" in prompt
    assert all(item.question not in prompt for item in TEST[1:])


def test_questions_limits_gsm8k_to_the_first_n() -> None:
    gsm8k = _nvidia(questions=3, warmup=2)[1]
    assert [r.expected for r in gsm8k.reps[0]] == [item.answer for item in TEST[:3]]
    assert gsm8k.warmup == gsm8k.reps[0][:2]
    assert "3 test questions, 5-shot from train" in gsm8k.describe()["what"]


def test_gsm8k_needs_five_train_items() -> None:
    with pytest.raises(ConfigError, match="needs 5 train items"):
        nvidia_suite(TEST, TRAIN[:4], questions=None, num_prompts=1, reps=1, warmup=0, seed=0)


def _recipes(seed: int = 1000):
    return recipes_suite(num_prompts=2, reps=2, warmup=1, seed=seed, vocab_size=1000)


def test_recipes_force_1024_tokens_on_code_prose_and_random_8k() -> None:
    workloads = _recipes()
    assert [w.name for w in workloads] == ["code", "prose", "random-8k"]
    for workload in workloads:
        assert not workload.natural_stop
        for request in (*workload.warmup, *(r for rep in workload.reps for r in rep)):
            assert request.sampling_params == {
                "temperature": 0.6,
                "top_p": 0.95,
                "top_k": 20,
                "max_new_tokens": 1024,
                "min_new_tokens": 1024,
                "ignore_eos": True,
            }
    code, prose, random8k = workloads
    assert code.reps[0][0].chat_template == {"enable_thinking": False}
    assert "LRU cache" in (code.reps[0][0].prompt or "")
    assert "tidal forces" in (prose.reps[0][0].prompt or "")
    ids = random8k.reps[0][0].input_ids
    assert ids is not None and len(ids) == 8192 and all(0 <= t < 1000 for t in ids)
    assert random8k.describe()["input_len"] == 8192


def test_every_recipe_request_has_its_own_seed_so_no_prefix_block_is_shared() -> None:
    workloads = _recipes(seed=1000)
    seeds = [seed for w in workloads for seed in w.params["seeds"]]
    assert seeds == list(range(1000, 1015))  # 3 workloads x (1 warm-up + 2 x 2)
    code, prose, random8k = workloads
    for workload in (code, prose):
        prompts = [r.prompt or "" for r in (*workload.warmup, *workload.reps[0], *workload.reps[1])]
        assert [p.split("]")[0] for p in prompts] == [f"[req {s}" for s in workload.params["seeds"]]
    blocks = [r.input_ids[:64] for r in (*random8k.warmup, *random8k.reps[0], *random8k.reps[1])]
    assert len(set(blocks)) == len(blocks)  # not one 64-token page in common


def test_recipes_are_deterministic_per_seed() -> None:
    assert _recipes(seed=7) == _recipes(seed=7)
    assert _recipes(seed=7)[2].reps != _recipes(seed=8)[2].reps
