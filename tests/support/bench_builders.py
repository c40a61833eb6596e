"""Small builders of benchmark results for the report, JSON and compare tests."""

from __future__ import annotations

from typing import Any

from app.bench.results import (
    BenchRun,
    ProfileResult,
    RequestRecord,
    RooflineColumns,
    WorkloadResult,
    WorkloadSummary,
)
from app.telemetry.metrics import reply_stats
from tests.support.bench_doubles import sample

SYNTHETIC_PLAN = {
    "name": "synthetic",
    "input_len": 32768,
    "output_len": 2048,
    "seed": 0,
    "vocab_size": 157184,
    "num_prompts": 5,
    "reps": 2,
    "warmup": 1,
    "sampling": {"temperature": 0.0, "max_new_tokens": 2048, "ignore_eos": True},
}


def summary(decode_tps: float | None, **overrides: Any) -> WorkloadSummary:
    """A summary whose TPOT matches `decode_tps`; other fields plausible or overridden."""
    tpot = 1 / decode_tps if decode_tps else None
    fields: dict[str, Any] = {
        "requests": 10,
        "errors": 0,
        "truncated": None,
        "completion_tokens": 20480,
        "tpot_s": tpot,
        "tpot_p95_s": tpot * 1.1 if tpot else None,
        "decode_tps": decode_tps,
        "ttft_s": 4.0,
        "latency_mean_s": 60.0,
        "latency_p50_s": 59.5,
        "latency_p95_s": 63.0,
        "accept_length": None,
        "accept_length_median": None,
        "accuracy": None,
        "context_tokens": 33792.0,
        "rep_decode_tps": (decode_tps, decode_tps) if decode_tps else (),
    }
    return WorkloadSummary(**{**fields, **overrides})


def profile(
    name: str,
    decode_tps: float | None,
    *,
    roofline: RooflineColumns | None = None,
    workload: str = "synthetic",
    **overrides: Any,
) -> ProfileResult:
    """A profile that ran one workload with one recorded request."""
    s = sample(ttft=4.0, tpot=0.03, tokens=5, verify_rounds=2)
    record = RequestRecord(
        rep=0,
        index=0,
        stats=reply_stats(s.started_at, s.arrivals, s.usage, s.ended_at),
        finish_reason="length",
    )
    result = WorkloadResult(workload, summary(decode_tps, **overrides), (record,), roofline)
    return ProfileResult(
        profile=name,
        engine={"moe_runner_backend": "humming"},
        proof={"profile": name, "lines": [], "facts": {}},
        workloads=(result,),
    )


def run(*profiles: ProfileResult, workloads: tuple[dict[str, Any], ...] = ()) -> BenchRun:
    """A run of these profiles on the synthetic plan (or the given workload plans)."""
    return BenchRun(
        created_at="2026-11-02T10:00:00+00:00",
        git={"commit": "abc123", "dirty": False},
        plan={
            "profiles": [p.profile for p in profiles],
            "workloads": list(workloads or (SYNTHETIC_PLAN,)),
            "peak_gbps": 273.0,
            "model_path": "/models/ling",
        },
        profiles=profiles,
    )
