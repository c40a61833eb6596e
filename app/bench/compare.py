"""Per-profile changes between two benchmark runs, flagging regressions past a threshold."""

from __future__ import annotations

from dataclasses import dataclass

from app.bench.results import BenchRun, WorkloadSummary
from app.render.grid import grid


@dataclass(frozen=True, slots=True)
class Metric:
    """A summary field compared between runs, and how to show it."""

    key: str
    title: str
    higher_is_better: bool
    scale: float = 1.0
    spec: str = ".2f"


METRICS = (
    Metric("decode_tps", "decode tok/s", True),
    Metric("tpot_s", "TPOT ms", False, 1000),
    Metric("ttft_s", "TTFT s", False, spec=".3f"),
    Metric("latency_p50_s", "E2E p50 s", False),
    Metric("latency_p95_s", "E2E p95 s", False),
    Metric("accept_length", "accept length", True),
    Metric("accuracy", "accuracy %", True, 100, ".1f"),
    Metric("errors", "errors", False, spec=".0f"),
    Metric("truncated", "truncated", False, spec=".0f"),
)


@dataclass(frozen=True, slots=True)
class Change:
    """One metric of one profile and workload, before (run A) and after (run B)."""

    workload: str
    profile: str
    metric: Metric
    before: float | None
    after: float | None
    regression: bool

    @property
    def pct(self) -> float | None:
        """Relative change in percent; None without a non-zero `before`."""
        if self.before is None or self.after is None or self.before == 0:
            return None
        return (self.after - self.before) / abs(self.before) * 100


@dataclass(frozen=True, slots=True)
class Comparison:
    """All changes, and the (workload, profile) pairs only one run has."""

    changes: tuple[Change, ...]
    only_a: tuple[tuple[str, str], ...]
    only_b: tuple[tuple[str, str], ...]

    @property
    def regressions(self) -> tuple[Change, ...]:
        """The changes for the worse beyond the threshold."""
        return tuple(change for change in self.changes if change.regression)

    @property
    def worse(self) -> bool:
        """A regression, or something run A measured that run B did not (a failed profile)."""
        return bool(self.regressions or self.only_a)


def _summaries(run: BenchRun) -> dict[tuple[str, str], WorkloadSummary]:
    return {
        (workload.name, profile.profile): workload.summary
        for profile in run.profiles
        for workload in profile.workloads
    }


def compare_runs(a: BenchRun, b: BenchRun, *, threshold_pct: float) -> Comparison:
    """Compare every (workload, profile) both runs measured.

    A change is a regression when it is for the worse and either exceeds `threshold_pct`
    or starts from zero (0 -> 1 errors), or when a measured value is gone in run B.
    """
    before, after = _summaries(a), _summaries(b)
    changes = []
    for key in (k for k in before if k in after):
        for metric in METRICS:
            old, new = getattr(before[key], metric.key), getattr(after[key], metric.key)
            if old is None and new is None:
                continue
            regressed = _regressed(metric, old, new, threshold_pct)
            changes.append(Change(*key, metric, old, new, regressed))
    return Comparison(
        changes=tuple(changes),
        only_a=tuple(k for k in before if k not in after),
        only_b=tuple(k for k in after if k not in before),
    )


def _regressed(metric: Metric, old: float | None, new: float | None, threshold_pct: float) -> bool:
    if old is None or new is None:
        return new is None  # a value that run B no longer has (it only got here if A had one)
    worse = new < old if metric.higher_is_better else new > old
    return worse and (old == 0 or abs(new - old) / abs(old) * 100 > threshold_pct)


def _value(metric: Metric, value: float | None) -> str:
    return "—" if value is None else format(value * metric.scale, metric.spec)


def _change(change: Change) -> str:
    if change.before is None or change.after is None:
        return "—"
    metric = change.metric
    delta = format((change.after - change.before) * metric.scale, "+" + metric.spec)
    pct = change.pct
    return delta if pct is None else f"{delta} ({pct:+.1f}%)"


def render_comparison(comparison: Comparison, *, threshold_pct: float) -> str:
    """A table per workload, then the missing pairs and a regression verdict."""
    blocks = []
    for workload in dict.fromkeys(change.workload for change in comparison.changes):
        rows = [
            [
                change.profile,
                change.metric.title,
                _value(change.metric, change.before),
                _value(change.metric, change.after),
                _change(change),
                "REGRESSION" if change.regression else "",
            ]
            for change in comparison.changes
            if change.workload == workload
        ]
        headers = ["profile", "metric", "A", "B", "change", ""]
        blocks.append(f"{workload}\n{grid(headers, rows, left=2)}")
    missing = [
        f"only in {label}: {profile} on {workload}"
        for label, pairs in (("A", comparison.only_a), ("B", comparison.only_b))
        for workload, profile in pairs
    ]
    if missing:
        blocks.append("\n".join(missing))
    count = len(comparison.regressions)
    verdict = f"{count} regression{'s' if count != 1 else ''} beyond {threshold_pct:g}%"
    if comparison.only_a:
        verdict += f"; {len(comparison.only_a)} measured in A missing from B"
    return "\n\n".join([*blocks, verdict])
