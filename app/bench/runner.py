"""Run workloads on each profile in turn: start, warm up, measure, shut down.

One request is in flight at a time (batch size 1). A profile whose engine fails to
start is recorded with its error and the run goes on with the next; a request that
fails is recorded as an error and the workload goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.bench.gsm8k import answers_match, extract_answer
from app.bench.protocol import BenchEngine, EngineFactory, finish_reason
from app.bench.results import (
    ProfileResult,
    RequestRecord,
    RooflineColumns,
    WorkloadResult,
    WorkloadSummary,
)
from app.bench.stats import summarize
from app.bench.workloads import BenchRequest, Workload
from app.errors import BackendError, LingChatError
from app.telemetry.metrics import reply_stats, speed_parts

RooflineFn = Callable[[str, WorkloadSummary, Mapping[str, Any]], RooflineColumns | None]
"""(profile, summary, the engine's describe()) -> roofline columns, or None."""


def _quiet(_: str) -> None:
    """Discard progress lines."""


async def run_bench(
    factory: EngineFactory,
    profiles: Sequence[str],
    workloads: Sequence[Workload],
    *,
    roofline: RooflineFn | None = None,
    log: Callable[[str], None] = _quiet,
    on_profile: Callable[[tuple[ProfileResult, ...]], None] | None = None,
) -> tuple[ProfileResult, ...]:
    """Benchmark every profile on every workload, one engine at a time.

    Args:
        factory: starts (and proves) the engine of a profile.
        profiles: profile names, in table order.
        workloads: run in this order on each engine.
        roofline: adds the roofline columns to each workload's result.
        log: receives one progress line per engine event and request.
        on_profile: receives the results so far after each profile (to save them: a run
            killed by a time limit keeps what it measured).
    """
    results = []
    for profile in profiles:
        log(f"{profile}: starting the engine")
        try:
            engine = await factory(profile)
        except LingChatError as exc:
            log(f"{profile}: failed to start: {exc}")
            results.append(ProfileResult(profile=profile, error=str(exc)))
            if on_profile is not None:
                on_profile(tuple(results))
            continue
        try:
            facts = engine.describe()
            done = [await _run_workload(engine, profile, workload, log) for workload in workloads]
        finally:
            log(f"{profile}: shutting down")
            await engine.shutdown()
        if roofline is not None:
            done = [replace(w, roofline=roofline(profile, w.summary, facts)) for w in done]
        results.append(
            ProfileResult(
                profile=profile,
                engine=facts.get("config") or {},
                proof=facts.get("proof"),
                workloads=tuple(done),
            )
        )
        if on_profile is not None:
            on_profile(tuple(results))
    return tuple(results)


async def _run_workload(
    engine: BenchEngine, profile: str, workload: Workload, log: Callable[[str], None]
) -> WorkloadResult:
    """Warm up, then send each repetition's requests in order."""
    tag = f"{profile} {workload.name}"
    records = []
    for index, request in enumerate(workload.warmup):
        log(f"{tag}: warm-up {index + 1}/{len(workload.warmup)}")
        records.append(await _send(engine, request, rep=None, index=index))
    for rep, requests in enumerate(workload.reps):
        for index, request in enumerate(requests):
            record = await _send(engine, request, rep=rep, index=index)
            where = f"rep {rep + 1}/{len(workload.reps)} #{index + 1}/{len(requests)}"
            log(f"{tag} {where}: {_describe(record)}")
            records.append(record)
    summary = summarize(records, natural_stop=workload.natural_stop)
    return WorkloadResult(workload.name, summary, tuple(records))


async def _send(
    engine: BenchEngine, request: BenchRequest, *, rep: int | None, index: int
) -> RequestRecord:
    """One request, measured and, when it has a gold answer, graded."""
    try:
        sample = await engine.generate(
            input_ids=list(request.input_ids) if request.input_ids is not None else None,
            prompt=request.prompt,
            sampling_params=dict(request.sampling_params),
        )
    except BackendError as exc:
        return RequestRecord(
            rep=rep,
            index=index,
            stats=None,
            finish_reason=None,
            error=str(exc),
            expected=request.expected,
        )
    extracted = extract_answer(sample.text) if request.expected is not None else None
    return RequestRecord(
        rep=rep,
        index=index,
        stats=reply_stats(sample.started_at, sample.arrivals, sample.meta_info, sample.ended_at),
        finish_reason=finish_reason(sample.meta_info),
        expected=request.expected,
        extracted=extracted,
        correct=(
            answers_match(extracted, request.expected) if request.expected is not None else None
        ),
    )


def _describe(record: RequestRecord) -> str:
    """A progress line's measurements."""
    if record.stats is None:
        return f"error: {record.error}"
    parts = [f"{record.stats.completion_tokens} tokens", *speed_parts(record.stats)]
    if record.correct is not None:
        parts.append(f"answer {record.extracted} {'ok' if record.correct else 'wrong'}")
    return ", ".join(parts)
