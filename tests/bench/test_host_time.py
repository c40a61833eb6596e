"""`bench --boots N,ENGINE=K` and `--host-time`: the boot order, a round's wall and GPU-busy
time from a pair of requests and the profiler's trace, and what a failure leaves."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from app.bench.host.measure import HostPlan, measure
from app.bench.host.rounds import HostBoot, HostTime, Timed, gpu_busy_us, per_round_ms, spread
from app.bench.runner import BootPlan
from tests.support.bench_doubles import PacedEngineDouble


def test_the_engines_booted_most_go_first_in_rounds_then_the_others() -> None:
    plan = BootPlan.parse("3,stack-recurrent=1,humming+nextn=1")
    engines = ["stack", "stack-recurrent", "humming+nextn", "stock-sglang"]
    assert [name for name, _ in plan.order(engines)] == [
        "stack", "stock-sglang", "stack", "stock-sglang", "stack", "stock-sglang",
        "stack-recurrent", "humming+nextn",
    ]  # fmt: skip
    assert plan.describe() == {"stack-recurrent": 1, "humming+nextn": 1, "default": 3}
    assert BootPlan.parse("2").order(["a", "b"]) == [("a", 0), ("b", 0), ("a", 1), ("b", 1)]
    assert BootPlan.parse("2").describe() == 2


@pytest.mark.parametrize("text", ["x", "2,stack", "2,stack=two", "0", "2,stack=0"])
def test_a_boot_plan_that_is_not_n_or_n_engine_k_is_one_line(text: str) -> None:
    with pytest.raises(ValueError, match=r"^('.*': give N or N,ENGINE=K|every engine boots)"):
        BootPlan.parse(text)


def _trace(path: Path, events: list[dict[str, object]]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as file:
        json.dump({"traceEvents": events}, file)
    return path


def test_gpu_busy_time_is_the_union_of_the_gpu_events_only(tmp_path: Path) -> None:
    events: list[dict[str, object]] = [
        {"cat": "kernel", "ts": 0, "dur": 10},
        {"cat": "gpu_memcpy", "ts": 5, "dur": 10},  # overlaps: 0-15
        {"cat": "kernel", "ts": 20, "dur": 5},  # 20-25
        {"cat": "gpu_memset", "ts": 21, "dur": 1},  # inside
        {"cat": "cpu_op", "ts": 0, "dur": 1000},  # the host's: not counted
        {"cat": "kernel", "ts": 30},  # no duration
    ]
    assert gpu_busy_us(_trace(tmp_path / "t.trace.json.gz", events)) == 20.0
    plain = tmp_path / "t.trace.json"
    plain.write_text(json.dumps({"traceEvents": events}))
    assert gpu_busy_us(plain) == 20.0


def test_a_round_is_the_long_request_less_the_short_one_over_the_rounds_between() -> None:
    assert per_round_ms(Timed(0.1, 4), Timed(0.7, 64)) == pytest.approx(10.0)
    assert per_round_ms(Timed(0.1, 4), Timed(0.2, 4)) is None
    host = HostTime(
        (
            HostBoot(8.0, (8.0, 8.2), 60, gpu_busy_ms=6.0, profiled_wall_ms=9.0),
            HostBoot(10.0, (10.0,), 60),
            HostBoot(9.0, (9.0,), 60),
            HostBoot(None, (), 0, error="BackendError: gone"),
        )
    )
    assert (host.wall_ms, host.gpu_busy_ms, host.idle_ms) == (9.0, 6.0, 3.0)
    assert spread(host.walls) == "9.000 (8.000-10.000)"
    assert HostTime.from_dict(json.loads(json.dumps(host.to_dict()))) == host


async def test_a_boot_s_round_from_its_pairs_and_on_a_first_boot_the_profiler(tmp_path) -> None:
    engine = PacedEngineDouble("stack", [], [], tpot=0.001)
    plan = HostPlan(folder=tmp_path, context=32, pairs=2)
    first = await measure(engine, "stack+bf16-router", True, plan)
    assert first.wall_ms == pytest.approx(4.0) and first.wall_ms_pairs == pytest.approx((4.0,) * 2)
    assert first.gpu_busy_ms == pytest.approx(0.4) and first.rounds == 60
    assert sorted(p.parent.name for p in tmp_path.glob("stack+bf16-router/*/*.trace.json.gz")) == [
        "long",
        "short",
    ]
    later = await measure(engine, "stack", False, plan)
    assert later.gpu_busy_ms is None and later.wall_ms == pytest.approx(4.0)
    sent = [call["input_ids"] for call in engine.calls]
    assert all(len(ids) == 32 for ids in sent) and len({tuple(ids) for ids in sent}) == 6


async def test_a_profiler_that_writes_no_trace_is_the_boot_s_error(tmp_path) -> None:
    engine = PacedEngineDouble("stack", [], [])

    async def stop_without_a_trace() -> None:
        engine.profiling = None

    engine.stop_profile = stop_without_a_trace  # type: ignore[method-assign]
    boot = await measure(engine, "stack", True, HostPlan(folder=tmp_path, pairs=1))
    assert boot.wall_ms is None and boot.error is not None
    assert boot.error.startswith("BackendError: the profiler wrote no trace in ")
