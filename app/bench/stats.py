"""Pure aggregation: percentiles, and a workload's summary from its request records."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from app.bench.acceptance import pooled_position_acceptance
from app.bench.results import RequestRecord, WorkloadSummary
from app.telemetry import windows
from app.telemetry.metrics import ReplyStats, pooled_accept_length


def percentile(values: Sequence[float], q: float) -> float | None:
    """The telemetry's q-th percentile (linear, as numpy's default), or None when empty."""
    return windows.percentile(values, q) if values else None


def _inverse(value: float | None) -> float | None:
    return 1.0 / value if value else None


def _tpots(stats: Sequence[ReplyStats]) -> list[float]:
    return [s.tpot_s for s in stats if s.tpot_s is not None]


def summarize(records: Sequence[RequestRecord], *, natural_stop: bool) -> WorkloadSummary:
    """Summarise the measured requests of one workload; warm-up records are ignored.

    Args:
        records: every record of the workload, warm-ups included.
        natural_stop: count finish_reason `length` as a truncation.
    """
    measured = [r for r in records if r.rep is not None]
    done = [r.stats for r in measured if r.stats is not None]
    tpots = _tpots(done)
    latencies = [s.latency_s for s in done]
    speculative = [s for s in done if s.verify_rounds]
    graded = [r for r in measured if r.expected is not None]
    tpot = percentile(tpots, 50)
    by_rep: dict[int, list[ReplyStats]] = {}
    for r in measured:
        if r.rep is not None and r.stats is not None:
            by_rep.setdefault(r.rep, []).append(r.stats)
    rep_tps = [_inverse(percentile(_tpots(by_rep[rep]), 50)) for rep in sorted(by_rep)]
    return WorkloadSummary(
        requests=len(measured),
        errors=sum(r.error is not None for r in measured),
        truncated=sum(r.finish_reason == "length" for r in measured) if natural_stop else None,
        completion_tokens=sum(s.completion_tokens for s in done),
        tpot_s=tpot,
        tpot_p95_s=percentile(tpots, 95),
        decode_tps=_inverse(tpot),
        ttft_s=percentile([s.ttft_s for s in done if s.ttft_s is not None], 50),
        latency_mean_s=statistics.fmean(latencies) if latencies else None,
        latency_p50_s=percentile(latencies, 50),
        latency_p95_s=percentile(latencies, 95),
        accept_length=pooled_accept_length(done),
        accept_length_median=percentile(
            [s.accept_length for s in speculative if s.accept_length is not None], 50
        ),
        accuracy=sum(bool(r.correct) for r in graded) / len(graded) if graded else None,
        context_tokens=(
            statistics.fmean(s.prompt_tokens + s.completion_tokens / 2 for s in done)
            if done
            else None
        ),
        rep_decode_tps=tuple(tps for tps in rep_tps if tps is not None),
        accept_positions=pooled_position_acceptance(s.accept_histogram for s in done),
    )
