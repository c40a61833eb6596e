"""The runner over scripted engines with known timings, checked against hand-computed values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.bench.inputs.gsm8k import load_gsm8k
from app.bench.inputs.workloads import reasoning_workload, synthetic_workload
from app.bench.results import RooflineColumns, WorkloadSummary
from app.bench.runner import run_bench
from app.core.errors import BackendError, ProofFailed
from tests.support.bench_doubles import EngineFactoryDouble, ScriptedEngineDouble, sample

FIXTURE = Path(__file__).parent.parent / "fixtures" / "gsm8k_small.jsonl"
SYNTHETIC = synthetic_workload(
    input_len=8, output_len=5, num_prompts=2, reps=2, warmup=1, vocab_size=100
)
WARMUP = sample(ttft=9.0, tpot=1.0, tokens=5)
"""Slow enough to spoil every number if it were counted."""


def _baseline_script() -> list[Any]:
    # TPOTs 0.02, 0.03 (rep 0), 0.025, 0.04 (rep 1); TTFT 0.5 each; 5 tokens.
    return [WARMUP] + [sample(ttft=0.5, tpot=t, tokens=5) for t in (0.02, 0.03, 0.025, 0.04)]


def _stack_script() -> list[Any]:
    # TPOT 0.01; (completion, verify rounds): accept lengths 3.0, 2.25, 2.5, 2.0.
    return [WARMUP] + [
        sample(ttft=0.2, tpot=0.01, tokens=n, verify_rounds=v)
        for n, v in ((9, 3), (9, 4), (10, 4), (6, 3))
    ]


async def test_summaries_match_hand_computed_values() -> None:
    journal: list[str] = []
    factory = EngineFactoryDouble(
        {
            "baseline": ScriptedEngineDouble("baseline", _baseline_script(), journal),
            "stack": ScriptedEngineDouble("stack", _stack_script(), journal),
        },
        journal,
    )
    baseline, stack = await run_bench(factory, ["baseline", "stack"], [SYNTHETIC])

    s = baseline.workloads[0].summary
    assert (s.requests, s.errors, s.truncated) == (4, 0, None)
    assert s.tpot_s == pytest.approx(0.0275)  # median of 0.02, 0.025, 0.03, 0.04
    assert s.tpot_p95_s == pytest.approx(0.0385)  # 0.03 + 0.85 * 0.01
    assert s.decode_tps == pytest.approx(1 / 0.0275)
    assert s.ttft_s == pytest.approx(0.5)
    # latencies 0.5 + 4 * TPOT: 0.58, 0.62, 0.60, 0.66
    assert s.latency_mean_s == pytest.approx(0.615)
    assert s.latency_p50_s == pytest.approx(0.61)
    assert s.latency_p95_s == pytest.approx(0.654)  # 0.62 + 0.85 * 0.04
    assert s.rep_decode_tps == pytest.approx((1 / 0.025, 1 / 0.0325))
    assert s.accept_length is None
    assert len(baseline.workloads[0].records) == 5
    assert baseline.workloads[0].records[0].rep is None

    t = stack.workloads[0].summary
    assert t.decode_tps == pytest.approx(100.0)
    assert t.accept_length == pytest.approx(34 / 14)  # total tokens / total verify rounds
    assert t.accept_length_median == pytest.approx(2.375)  # median of 2.0, 2.25, 2.5, 3.0
    assert t.completion_tokens == 34


async def test_one_engine_at_a_time_in_profile_order() -> None:
    journal: list[str] = []
    engines = {
        "baseline": ScriptedEngineDouble("baseline", _baseline_script(), journal),
        "stack": ScriptedEngineDouble("stack", _stack_script(), journal),
    }
    await run_bench(EngineFactoryDouble(engines, journal), ["stack", "baseline"], [SYNTHETIC])
    assert journal == (
        ["start stack"] + ["generate stack"] * 5 + ["shutdown stack"]
        + ["start baseline"] + ["generate baseline"] * 5 + ["shutdown baseline"]
    )  # fmt: skip


async def test_requests_carry_the_workload_ids_and_sampling() -> None:
    journal: list[str] = []
    engine = ScriptedEngineDouble("baseline", _baseline_script(), journal)
    await run_bench(EngineFactoryDouble({"baseline": engine}, journal), ["baseline"], [SYNTHETIC])
    sent = [*SYNTHETIC.warmup, *SYNTHETIC.reps[0], *SYNTHETIC.reps[1]]
    assert [call["input_ids"] for call in engine.calls] == [list(r.input_ids or ()) for r in sent]
    assert all(call["prompt"] is None for call in engine.calls)
    assert engine.calls[0]["sampling_params"] == dict(SYNTHETIC.warmup[0].sampling_params)


async def test_failed_request_is_recorded_and_the_workload_goes_on() -> None:
    journal: list[str] = []
    script = _baseline_script()
    script[2] = BackendError("scheduler hiccup")
    engine = ScriptedEngineDouble("baseline", script, journal)
    (result,) = await run_bench(
        EngineFactoryDouble({"baseline": engine}, journal), ["baseline"], [SYNTHETIC]
    )
    summary = result.workloads[0].summary
    assert (summary.requests, summary.errors) == (4, 1)
    assert summary.tpot_s == pytest.approx(0.025)  # median of 0.02, 0.025, 0.04
    assert result.workloads[0].records[2].error == "scheduler hiccup"


async def test_engine_that_fails_to_start_is_recorded_and_the_run_goes_on() -> None:
    journal: list[str] = []
    factory = EngineFactoryDouble(
        {
            "humming": ProofFailed("Humming MoE not engaged"),
            "stack": ScriptedEngineDouble("stack", _stack_script(), journal),
        },
        journal,
    )
    humming, stack = await run_bench(factory, ["humming", "stack"], [SYNTHETIC])
    assert humming.error == "Humming MoE not engaged"
    assert humming.workloads == ()
    assert stack.error is None and stack.workloads[0].summary.requests == 4
    assert "shutdown humming" not in journal


async def test_results_so_far_are_handed_over_after_each_profile() -> None:
    journal: list[str] = []
    factory = EngineFactoryDouble(
        {
            "humming": ProofFailed("Humming MoE not engaged"),
            "stack": ScriptedEngineDouble("stack", _stack_script(), journal),
            "baseline": ScriptedEngineDouble("baseline", [RuntimeError("killed")], journal),
        },
        journal,
    )
    saved: list[list[str]] = []
    with pytest.raises(RuntimeError, match="killed"):
        await run_bench(
            factory,
            ["humming", "stack", "baseline"],
            [SYNTHETIC],
            on_profile=lambda done: saved.append([p.profile for p in done]),
        )
    assert saved == [["humming"], ["humming", "stack"]]  # the third never finished


async def test_engine_is_shut_down_when_a_bug_escapes() -> None:
    journal: list[str] = []
    engine = ScriptedEngineDouble("baseline", [RuntimeError("bug")], journal)
    with pytest.raises(RuntimeError, match="bug"):
        await run_bench(
            EngineFactoryDouble({"baseline": engine}, journal), ["baseline"], [SYNTHETIC]
        )
    assert journal[-1] == "shutdown baseline"


async def test_reasoning_replies_are_graded_and_truncations_counted() -> None:
    items = load_gsm8k(FIXTURE)
    workload = reasoning_workload(
        items, num_prompts=3, reps=1, warmup=0, max_new_tokens=64, dataset="d"
    )
    script: list[Any] = [
        sample(ttft=0.1, tpot=0.01, tokens=20, text="7 * 3 = 21. The answer is 21.", finish="stop"),
        sample(ttft=0.1, tpot=0.01, tokens=20, text="So $1,080 - 380 = $700.", finish="stop"),
        sample(ttft=0.1, tpot=0.01, tokens=64, text="There are 6 * 15 = 90 tul", finish="length"),
    ]
    journal: list[str] = []
    engine = ScriptedEngineDouble("baseline", script, journal)
    (result,) = await run_bench(
        EngineFactoryDouble({"baseline": engine}, journal), ["baseline"], [workload]
    )
    records = result.workloads[0].records
    assert [(r.expected, r.extracted, r.correct) for r in records] == [
        ("21", "21", True),
        ("700", "700", True),
        ("60", "90", False),
    ]
    assert result.workloads[0].summary.accuracy == pytest.approx(2 / 3)
    assert result.workloads[0].summary.truncated == 1
    assert engine.calls[0]["input_ids"] is None
    assert engine.calls[0]["prompt"].endswith(f"Question: {items[5].question}\nAnswer:")


async def test_engine_facts_and_roofline_are_attached() -> None:
    journal: list[str] = []
    facts = {"config": {"moe_runner_backend": "humming"}, "proof": {"profile": "humming"}}
    engine = ScriptedEngineDouble("humming", _baseline_script(), journal, facts=facts)
    seen: list[tuple[str, WorkloadSummary, Any]] = []

    def roofline(profile: str, summary: WorkloadSummary, given: Any) -> RooflineColumns:
        seen.append((profile, summary, given))
        return RooflineColumns(1, 2.0, 3.0, 4.0, 0.5)

    (result,) = await run_bench(
        EngineFactoryDouble({"humming": engine}, journal),
        ["humming"],
        [SYNTHETIC],
        roofline=roofline,
    )
    assert result.engine == {"moe_runner_backend": "humming"}
    assert result.proof == {"profile": "humming"}
    assert result.workloads[0].roofline == RooflineColumns(1, 2.0, 3.0, 4.0, 0.5)
    assert seen == [("humming", result.workloads[0].summary, facts)]


async def test_progress_lines_name_profile_workload_and_request() -> None:
    journal: list[str] = []
    engine = ScriptedEngineDouble("stack", _stack_script(), journal)
    lines: list[str] = []
    await run_bench(
        EngineFactoryDouble({"stack": engine}, journal), ["stack"], [SYNTHETIC], log=lines.append
    )
    assert "stack synthetic: warm-up 1/1" in lines
    progress = "stack synthetic rep 1/2 #1/2: 9 tokens, 100 tok/s, TPOT 10.0 ms"
    assert f"{progress}, accept 3.00 (3 rounds), TTFT 0.20 s" in lines


async def test_boots_rotate_the_profiles_and_pool_each_profiles_requests() -> None:
    journal: list[str] = []
    slower = [WARMUP] + [sample(ttft=0.5, tpot=0.05, tokens=5) for _ in range(4)]
    factory = EngineFactoryDouble(
        {
            "baseline": ScriptedEngineDouble("baseline", _baseline_script() + slower, journal),
            "stack": ScriptedEngineDouble("stack", _stack_script() * 2, journal),
        },
        journal,
    )
    saved: list[int] = []
    seen: list[tuple[str, int]] = []

    def roofline(profile: str, summary: WorkloadSummary, facts: Any) -> RooflineColumns:
        seen.append((profile, summary.requests))
        return RooflineColumns(16, 1e9, 100.0, summary.decode_tps or 0.0, 0.5, None)

    baseline, stack = await run_bench(
        factory,
        ["baseline", "stack"],
        [SYNTHETIC],
        boots=2,
        roofline=roofline,
        on_profile=lambda done: saved.append(done[0].workloads[0].summary.requests),
    )
    assert seen[-2:] == [("baseline", 8), ("stack", 8)]  # the pooled boots, not the last one
    assert baseline.workloads[0].roofline == roofline("baseline", baseline.workloads[0].summary, {})
    assert [e for e in journal if e.startswith("start")] == ["start baseline", "start stack"] * 2
    assert saved == [4, 4, 8, 8]  # baseline's requests after each of the four engines
    workload = baseline.workloads[0]
    assert [r.rep for r in workload.records] == [None, 0, 0, 1, 1, None, 2, 2, 3, 3]
    s = workload.summary
    assert s.requests == 8
    assert s.tpot_s == pytest.approx(0.045)  # median of 0.02 0.025 0.03 0.04 and four 0.05
    assert s.rep_decode_tps == pytest.approx((1 / 0.025, 1 / 0.0325, 1 / 0.05, 1 / 0.05))
    assert s.boot_decode_tps == pytest.approx((1 / 0.0275, 1 / 0.05))
    assert stack.workloads[0].summary.boot_decode_tps == pytest.approx((100.0, 100.0))


async def test_a_boot_that_fails_is_named_and_the_others_still_count() -> None:
    journal: list[str] = []
    engine = ScriptedEngineDouble("stack", _stack_script(), journal)
    starts: list[Exception | ScriptedEngineDouble] = [ProofFailed("accept 1.02"), engine]

    async def factory(profile: str) -> ScriptedEngineDouble:
        step = starts.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    (stack,) = await run_bench(factory, ["stack"], [SYNTHETIC], boots=2)
    assert stack.error == "1 of 2 boots failed: accept 1.02"
    s = stack.workloads[0].summary
    assert s.requests == 4 and s.boot_decode_tps == pytest.approx((100.0,))


async def test_a_profile_whose_every_boot_fails_says_so() -> None:
    factory = EngineFactoryDouble({"stack": ProofFailed("accept 1.02")}, [])
    (stack,) = await run_bench(factory, ["stack"], [SYNTHETIC], boots=2)
    assert (stack.error, stack.workloads) == ("2 of 2 boots failed: accept 1.02", ())
