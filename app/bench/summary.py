"""The fields of NVIDIA's published summary files, and each profile's McNemar test against
the baseline, computed from a run's per-request records.

Field names and definitions follow `results/gsm8k-1319-*-summary.json` of
`ly01325/Ling3-Flash-DGX-Spark`: `aggregate_decode_tokens_per_s` is the decode tokens
excluding each reply's first over the total decode seconds (each reply's time after its
first token); `accuracy` is correct over completed requests.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.bench.mcnemar import PairedCorrectness, paired_correctness
from app.bench.report import BASELINE
from app.bench.results import BenchRun, RequestRecord
from app.bench.stats import percentile
from app.render.grid import grid

_NONE = "—"


@dataclass(frozen=True, slots=True)
class PublishedSummary:
    """One workload on one profile, in the published summary's fields (seconds, tokens)."""

    completed: int
    successful: int
    errors: int
    correct: int | None
    accuracy: float | None
    invalid_answers: int | None
    """Graded replies with no number to read."""
    truncated: int
    """Replies that ended on max_new_tokens."""
    completion_tokens: int
    decode_tokens_excluding_first: int
    total_decode_s: float
    aggregate_decode_tokens_per_s: float | None
    mean_latency_s: float | None
    p50_latency_s: float | None
    p95_latency_s: float | None
    mean_ttft_s: float | None
    p50_completion_tokens: float | None
    p95_completion_tokens: float | None
    finish_reasons: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def published_summary(records: Sequence[RequestRecord]) -> PublishedSummary:
    """Summarise the measured requests of one workload; warm-ups are ignored."""
    measured = [r for r in records if r.rep is not None]
    done = [r for r in measured if r.stats is not None]
    stats = [r.stats for r in done if r.stats is not None]
    timed = [s for s in stats if s.ttft_s is not None]
    graded = [r for r in measured if r.expected is not None]
    decode_tokens = sum(max(s.completion_tokens - 1, 0) for s in timed)
    decode_s = sum(s.latency_s - s.ttft_s for s in timed if s.ttft_s is not None)
    latencies = [s.latency_s for s in stats]
    tokens = [float(s.completion_tokens) for s in stats]
    ttfts = [s.ttft_s for s in timed if s.ttft_s is not None]
    correct = sum(bool(r.correct) for r in graded) if graded else None
    return PublishedSummary(
        completed=len(measured),
        successful=len(done),
        errors=len(measured) - len(done),
        correct=correct,
        accuracy=correct / len(measured) if correct is not None else None,
        invalid_answers=(
            sum(r.extracted is None for r in graded if r.stats is not None) if graded else None
        ),
        truncated=sum(r.finish_reason == "length" for r in done),
        completion_tokens=sum(s.completion_tokens for s in stats),
        decode_tokens_excluding_first=decode_tokens,
        total_decode_s=decode_s,
        aggregate_decode_tokens_per_s=decode_tokens / decode_s if decode_s > 0 else None,
        mean_latency_s=statistics.fmean(latencies) if latencies else None,
        p50_latency_s=percentile(latencies, 50),
        p95_latency_s=percentile(latencies, 95),
        mean_ttft_s=statistics.fmean(ttfts) if ttfts else None,
        p50_completion_tokens=percentile(tokens, 50),
        p95_completion_tokens=percentile(tokens, 95),
        finish_reasons=dict(Counter(r.finish_reason or "error" for r in measured)),
    )


def correctness(records: Sequence[RequestRecord]) -> dict[tuple[int, int], bool]:
    """{(repetition, question index): correct} of the graded measured requests."""
    return {
        (r.rep, r.index): bool(r.correct)
        for r in records
        if r.rep is not None and r.expected is not None
    }


def against_baseline(run: BenchRun, workload: str) -> dict[str, PairedCorrectness]:
    """Each other profile's per-question correctness paired with the baseline's."""
    graded = {
        p.profile: correctness(found.records)
        for p in run.profiles
        if (found := p.workload(workload)) is not None
    }
    reference = graded.get(BASELINE)
    if not reference:
        return {}
    return {
        name: paired_correctness(reference, answers)
        for name, answers in graded.items()
        if name != BASELINE and answers
    }


def published_json(run: BenchRun) -> dict[str, dict[str, Any]]:
    """Per workload: each profile's published summary and, on graded workloads, its McNemar
    test against the baseline."""
    data: dict[str, dict[str, Any]] = {}
    for description in run.plan["workloads"]:
        name = description["name"]
        paired = against_baseline(run, name)
        data[name] = {
            p.profile: {
                **published_summary(found.records).to_dict(),
                "mcnemar_vs_baseline": (
                    paired[p.profile].to_dict() if p.profile in paired else None
                ),
            }
            for p in run.profiles
            if (found := p.workload(name)) is not None
        }
    return data


def _fmt(value: float | None, spec: str) -> str:
    return _NONE if value is None else format(value, spec)


def published_table(run: BenchRun, workload: str) -> str:
    """The published fields of one workload, a row per profile, with McNemar's p."""
    paired = against_baseline(run, workload)
    headers = ["profile", "decode tok/s", "E2E s mean", "p50", "p95", "TTFT s mean"]
    headers += ["tokens p50", "p95", "finish", "accuracy", "vs baseline (b/c)", "McNemar p"]
    rows = []
    for p in run.profiles:
        found = p.workload(workload)
        if found is None:
            continue
        s = published_summary(found.records)
        test = paired.get(p.profile)
        rows.append(
            [
                p.profile,
                _fmt(s.aggregate_decode_tokens_per_s, ".2f"),
                _fmt(s.mean_latency_s, ".2f"),
                _fmt(s.p50_latency_s, ".2f"),
                _fmt(s.p95_latency_s, ".2f"),
                _fmt(s.mean_ttft_s, ".3f"),
                _fmt(s.p50_completion_tokens, ".0f"),
                _fmt(s.p95_completion_tokens, ".0f"),
                " ".join(f"{k}:{v}" for k, v in sorted(s.finish_reasons.items())),
                _fmt(s.accuracy, ".2%"),
                f"{test.only_reference}/{test.only_this}" if test else _NONE,
                _fmt(test.p_value, ".4f") if test else _NONE,
            ]
        )
    return grid(headers, rows)


SUMMARY_NOTE = (
    "decode tok/s: decode tokens after each reply's first / total decode seconds (the published"
    " summaries' aggregate_decode_tokens_per_s); b/c: questions only the baseline / only this"
    " profile answered right; McNemar p: exact binomial test on them"
)


def render_published(run: BenchRun) -> str:
    """Every workload's published-summary table."""
    blocks = [
        f"{d['name']}, as the published summaries count it\n{published_table(run, d['name'])}"
        for d in run.plan["workloads"]
    ]
    return "\n\n".join([*blocks, SUMMARY_NOTE])
