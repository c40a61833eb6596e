"""Run workloads on each profile in turn: start, warm up, measure, shut down.

One request is in flight at a time (batch size 1). A profile whose engine fails to
start is recorded with its error and the run goes on with the next; a request that
fails is recorded as an error and the workload goes on.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from app.bench.host.rounds import HostBoot, HostTime
from app.bench.inputs.gsm8k import answers_match, extract_answer
from app.bench.inputs.workloads import BenchRequest, Workload
from app.bench.protocol import BenchEngine, EngineFactory
from app.bench.results import (
    ProfileResult,
    RequestRecord,
    RooflineColumns,
    WorkloadResult,
    WorkloadSummary,
)
from app.bench.stats import summarize
from app.core.errors import BackendError, LingChatError
from app.render.figures import speed_parts
from app.telemetry.metrics import reply_stats

RooflineFn = Callable[[str, WorkloadSummary, Mapping[str, Any]], RooflineColumns | None]
"""(profile, summary, the engine's describe()) -> roofline columns, or None."""
HostProbe = Callable[[BenchEngine, str, bool], Awaitable[HostBoot]]
"""(a started engine, its name, whether this is its first boot) -> its host time a round."""


@dataclass(frozen=True, slots=True)
class BootPlan:
    """How many times each engine is booted: `default`, or its own count in `counts`."""

    default: int = 1
    counts: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> BootPlan:
        """`N` or `N,ENGINE=K,...`.

        Raises:
            ValueError: another form, or a count below 1 (one line).
        """
        first, *named = [part.strip() for part in text.split(",")]
        try:
            counts = {name.strip(): int(k) for name, _, k in (p.partition("=") for p in named)}
            plan = cls(int(first), counts)
        except ValueError:
            raise ValueError(f"{text!r}: give N or N,ENGINE=K,...") from None
        if min([plan.default, *plan.counts.values()]) < 1:
            raise ValueError("every engine boots at least once")
        return plan

    def count(self, engine: str) -> int:
        return self.counts.get(engine, self.default)

    def order(self, engines: Sequence[str]) -> list[tuple[str, int]]:
        """Every boot as (engine, its boot index): the engines booted most often first, in
        rounds (A B A B ...), so that drift touches them alike; then each smaller count's
        engines, in rounds of their own."""
        boots = []
        for count in sorted({self.count(e) for e in engines}, reverse=True):
            tier = [e for e in engines if self.count(e) == count]
            boots += [(engine, n) for n in range(count) for engine in tier]
        return boots

    def describe(self) -> int | dict[str, int]:
        """The JSON plan's `boots`: one count, or each engine's."""
        return dict(self.counts, default=self.default) if self.counts else self.default


def _quiet(_: str) -> None:
    """Discard progress lines."""


async def run_bench(
    factory: EngineFactory,
    profiles: Sequence[str],
    workloads: Sequence[Workload],
    *,
    boots: BootPlan | int = 1,
    roofline: RooflineFn | None = None,
    host: HostProbe | None = None,
    log: Callable[[str], None] = _quiet,
    on_profile: Callable[[tuple[ProfileResult, ...]], None] | None = None,
) -> tuple[ProfileResult, ...]:
    """Benchmark every profile on every workload, one engine at a time.

    Args:
        factory: starts (and proves) the engine of a profile.
        profiles: profile names, in table order.
        workloads: run in this order on each engine.
        boots: how many times each profile's engine is started (`BootPlan.order`), so that
            drift of the machine touches every profile alike; a profile's boots are pooled,
            and each boot's decode speed is kept (`boot_decode_tps`).
        roofline: adds the roofline columns to each workload's result.
        host: measures each boot's host time a round after its workloads.
        log: receives one progress line per engine event and request, and after each boot
            the time it took and an estimate of what is left.
        on_profile: receives the results so far after each engine (to save them: a run
            killed by a time limit keeps what it measured).
    """
    plan = boots if isinstance(boots, BootPlan) else BootPlan(boots)
    order = plan.order(profiles)
    booted: dict[str, list[ProfileResult]] = {}
    pooled: dict[str, ProfileResult] = {}
    facts: dict[str, Mapping[str, Any]] = {}
    started = time.monotonic()
    for done, (profile, boot) in enumerate(order, start=1):
        count = plan.count(profile)
        tag = profile if count == 1 else f"{profile} (boot {boot + 1}/{count})"
        result, described = await _run_profile(
            factory, profile, tag, workloads, log, host=host, first=boot == 0
        )
        booted.setdefault(profile, []).append(result)
        if described is not None:
            facts[profile] = described
        pooled[profile] = _with_roofline(
            _pool_boots(booted[profile], workloads), facts.get(profile, {}), roofline
        )
        elapsed = time.monotonic() - started
        left = elapsed / done * (len(order) - done)
        log(f"{tag}: boot {done}/{len(order)} done at {elapsed:.0f} s; about {left:.0f} s left")
        if on_profile is not None:
            on_profile(tuple(pooled[p] for p in profiles if p in pooled))
    return tuple(pooled[p] for p in profiles if p in pooled)


async def _run_profile(
    factory: EngineFactory,
    profile: str,
    tag: str,
    workloads: Sequence[Workload],
    log: Callable[[str], None],
    *,
    host: HostProbe | None = None,
    first: bool = True,
) -> tuple[ProfileResult, Mapping[str, Any] | None]:
    """One engine boot of `profile`: its result, and its `describe()` if it started."""
    log(f"{tag}: starting the engine")
    try:
        engine = await factory(profile)
    except LingChatError as exc:
        log(f"{tag}: failed to start: {exc}")
        return ProfileResult(profile=profile, error=str(exc)), None
    measured = None
    try:
        facts = engine.describe()
        done = [await _run_workload(engine, profile, workload, log) for workload in workloads]
        if host is not None:
            log(f"{tag}: host time a round")
            measured = HostTime((await host(engine, profile, first),))
            log(f"{tag}: {measured.boots[0].describe()}")
    finally:
        log(f"{tag}: shutting down")
        await engine.shutdown()
    result = ProfileResult(
        profile=profile,
        engine=facts.get("config") or {},
        proof=facts.get("proof"),
        workloads=tuple(done),
        host=measured,
    )
    return result, facts


def _with_roofline(
    result: ProfileResult, facts: Mapping[str, Any], roofline: RooflineFn | None
) -> ProfileResult:
    """`result` with the roofline columns of each workload (from its pooled summary)."""
    if roofline is None or not result.workloads:
        return result
    done = [
        replace(w, roofline=roofline(result.profile, w.summary, facts)) for w in result.workloads
    ]
    return replace(result, workloads=tuple(done))


def _pool_boots(results: Sequence[ProfileResult], workloads: Sequence[Workload]) -> ProfileResult:
    """One profile's engine boots as one result: every boot's requests summarised together.

    Repetitions are numbered on across boots, so `rep_decode_tps` spans them all, and
    `boot_decode_tps` holds each boot's own decode speed; each boot's host time is kept. A
    boot that failed to start is named in `error`; the boots that ran still count.
    """
    if len(results) == 1:
        return results[0]
    ran = [r for r in results if r.error is None]
    failed = [r.error for r in results if r.error is not None]
    error = f"{len(failed)} of {len(results)} boots failed: {failed[0]}" if failed else None
    if not ran:
        return ProfileResult(profile=results[0].profile, error=error)
    pooled = []
    for workload in workloads:
        found = [(i, w) for i, r in enumerate(ran) if (w := r.workload(workload.name))]
        if not found:
            continue
        reps = len(workload.reps)
        records = tuple(
            replace(record, rep=None if record.rep is None else record.rep + i * reps)
            for i, w in found
            for record in w.records
        )
        summary = replace(
            summarize(records, natural_stop=workload.natural_stop),
            boot_decode_tps=tuple(
                w.summary.decode_tps for _, w in found if w.summary.decode_tps is not None
            ),
        )
        pooled.append(WorkloadResult(workload.name, summary, records))
    last = ran[-1]
    measured = [boot for r in ran if r.host is not None for boot in r.host.boots]
    host = HostTime(tuple(measured)) if measured else None
    return ProfileResult(last.profile, last.engine, last.proof, tuple(pooled), error, host)


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
            chat_template=request.chat_template,
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
        stats=reply_stats(sample.started_at, sample.arrivals, sample.usage, sample.ended_at),
        finish_reason=sample.finish_reason,
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
