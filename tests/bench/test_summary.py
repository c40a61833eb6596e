"""The published summary's fields, and McNemar against the baseline, from request records."""

from __future__ import annotations

import pytest

from app.bench.results import BenchRun, ProfileResult, RequestRecord, WorkloadResult
from app.bench.stats import summarize
from app.bench.summary import published_json, published_summary, render_published
from app.telemetry.metrics import reply_stats
from tests.support.bench_doubles import sample


def _record(
    rep: int | None,
    index: int,
    *,
    ttft: float = 0.1,
    tpot: float = 0.01,
    tokens: int = 11,
    finish: str = "stop",
    correct: bool | None = None,
    extracted: str | None = "7",
) -> RequestRecord:
    s = sample(ttft=ttft, tpot=tpot, tokens=tokens, finish=finish)
    return RequestRecord(
        rep=rep,
        index=index,
        stats=reply_stats(s.started_at, s.arrivals, s.usage, s.ended_at),
        finish_reason=finish,
        expected=None if correct is None else "7",
        extracted=extracted if correct is not None else None,
        correct=correct,
    )


RECORDS = (
    _record(None, 0, tokens=1000, tpot=0.5, correct=False),  # warm-up: never counted
    _record(0, 0, ttft=0.2, tpot=0.02, tokens=11, correct=True),
    _record(0, 1, ttft=0.4, tpot=0.01, tokens=31, finish="length", correct=False, extracted=None),
    RequestRecord(rep=0, index=2, stats=None, finish_reason=None, error="lost", expected="7"),
)


def test_the_published_fields_from_hand_worked_records() -> None:
    s = published_summary(RECORDS)
    assert (s.completed, s.successful, s.errors) == (3, 2, 1)
    assert (s.correct, s.invalid_answers, s.truncated) == (1, 1, 1)
    assert s.accuracy == pytest.approx(1 / 3)  # a failed request counts as wrong
    assert s.completion_tokens == 42
    assert s.decode_tokens_excluding_first == 40
    assert s.total_decode_s == pytest.approx(0.2 + 0.3)
    assert s.aggregate_decode_tokens_per_s == pytest.approx(80.0)
    assert s.mean_latency_s == pytest.approx(0.55)
    assert s.p50_latency_s == pytest.approx(0.55)
    assert s.p95_latency_s == pytest.approx(0.4 + 0.95 * 0.3)
    assert s.mean_ttft_s == pytest.approx(0.3)
    assert s.p50_completion_tokens == pytest.approx(21)
    assert s.p95_completion_tokens == pytest.approx(30)
    assert s.finish_reasons == {"stop": 1, "length": 1, "error": 1}


def test_aggregate_decode_speed_weights_replies_by_their_tokens() -> None:
    # The bench table's speed is 1 / median TPOT; the published one pools tokens and seconds.
    table = summarize(RECORDS, natural_stop=True)
    assert table.decode_tps == pytest.approx(1 / 0.015)
    assert published_summary(RECORDS).aggregate_decode_tokens_per_s == pytest.approx(80.0)


def test_ungraded_workloads_have_no_accuracy() -> None:
    s = published_summary([_record(0, 0), _record(0, 1)])
    assert (s.correct, s.accuracy, s.invalid_answers) == (None, None, None)


def _graded(name: str, answers: list[bool]) -> ProfileResult:
    records = tuple(_record(0, i, correct=ok) for i, ok in enumerate(answers))
    summary = summarize(records, natural_stop=True)
    return ProfileResult(profile=name, workloads=(WorkloadResult("gsm8k", summary, records),))


def _run(*profiles: ProfileResult) -> BenchRun:
    plan = {"suite": "nvidia", "workloads": [{"name": "gsm8k"}], "profiles": []}
    return BenchRun(created_at="2026-12-02T00:00:00+00:00", git=None, plan=plan, profiles=profiles)


BASE = [True] * 10 + [False] * 2
STACK = [False] + [True] * 9 + [True, True]  # loses question 0, wins questions 10 and 11


def test_each_profile_is_paired_with_the_baseline_question_by_question() -> None:
    data = published_json(_run(_graded("baseline", BASE), _graded("stack", STACK)))["gsm8k"]
    assert data["baseline"]["mcnemar_vs_baseline"] is None
    assert data["baseline"]["correct"] == 10 and data["stack"]["correct"] == 11
    assert data["stack"]["mcnemar_vs_baseline"] == {
        "pairs": 12,
        "both": 9,
        "only_reference": 1,
        "only_this": 2,
        "neither": 0,
        "p_value": 1.0,  # 2 * (1 + 3) / 8 capped
    }


def test_without_a_baseline_nothing_is_paired() -> None:
    data = published_json(_run(_graded("humming", BASE), _graded("stack", STACK)))["gsm8k"]
    assert data["stack"]["mcnemar_vs_baseline"] is None


def test_the_table_shows_the_published_fields_and_mcnemar() -> None:
    text = render_published(_run(_graded("baseline", BASE), _graded("stack", STACK)))
    lines = text.splitlines()
    assert lines[0] == "gsm8k, as the published summaries count it"
    assert "McNemar p" in lines[1] and "decode tok/s" in lines[1]
    stack = next(line.split() for line in lines if line.startswith("stack "))
    assert stack[1] == "100.00"  # 10 tokens after the first in 0.1 s
    assert stack[-4:] == ["stop:12", "91.67%", "1/2", "1.0000"]
    base = next(line.split() for line in lines if line.startswith("baseline "))
    assert base[-2:] == ["—", "—"]
    assert "exact binomial" in lines[-1]
