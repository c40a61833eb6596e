"""The host term of a Spark round, the engines a host-time run boots, and the scheduler probe.

The host-time file here is synthetic (`SYNTHETIC_HOST_RUN`): numbers chosen so that each
branch of the term shows, not measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lab.research import host_probe
from lab.research.host_time import (
    Engine,
    HostRound,
    HostRun,
    engines,
    host_projection,
    host_table,
    spark_host_ms,
)
from lab.research.projection import HOST_ACCEPTS, spark_projection
from lab.tests.test_projection import (
    ROOT,
    dspark_round,
    humming,
    humming_fp8,
    load,
    replayssm_round,
)


def synthetic_row(profile: str, backend: str, pin: bool, **times: float) -> dict[str, Any]:
    """One synthetic row: 12 ms of GPU a round, the rest as given."""
    return {
        "profile": profile,
        "backend": backend,
        "pin": pin,
        "pin_forced": pin and backend == "triton",
        "rounds": 28,
        "accept_length": 4.0,
        "wall_ms": 13.0,
        "gpu_busy_ms": 12.0,
        "profiled_wall_ms": 13.5,
        "host_wait_ms": 6.0,
        "pin_ms": 1.0,
        **times,
    }


SYNTHETIC_HOST_RUN: dict[str, Any] = {
    "kind": "synthetic",
    "gpu": "NVIDIA H200",
    "cpu": "a synthetic CPU",
    "layers": 42,
    "rows": [
        # unpinned: the host runs ahead, 12.5 - 0.5 = 7 ms of loop a round
        synthetic_row("stack", "triton", False, wall_ms=12.5, host_wait_ms=5.5),
        # pinned: the GPU waits 1.5 ms a round for the host
        synthetic_row("stack", "triton", True, wall_ms=13.5),
        synthetic_row("stack", "flashinfer", True, wall_ms=14.0, gpu_busy_ms=12.2),
        synthetic_row("dspark", "flashinfer", True, wall_ms=16.0, gpu_busy_ms=15.0),
        synthetic_row("stack-recurrent", "triton", False),  # no projected round: left out
    ],
}


def run() -> HostRun:
    return HostRun.from_dict(SYNTHETIC_HOST_RUN)


def rows() -> dict[str, HostRound]:
    return {r.label: r for r in run().rows}


# --- the engines -------------------------------------------------------------------------


def test_a_backend_pinned_by_itself_is_booted_once_the_others_with_and_without_the_pin() -> None:
    assert engines(["stack", "dspark"], ["triton", "flashinfer"], ["auto", "on"]) == [
        Engine("stack", "triton", False),
        Engine("stack", "triton", True),
        Engine("stack", "flashinfer", False),
        Engine("dspark", "triton", False),
        Engine("dspark", "triton", True),
        Engine("dspark", "flashinfer", False),
    ]
    assert Engine("stack", "triton", True).name == "stack-triton-pin"


@pytest.mark.parametrize(
    ("profiles", "pins", "message"),
    [
        (["humming+fp8"], ["auto"], "not a speculative profile"),
        (["nope"], ["auto"], "not a speculative profile"),
        (["stack"], ["auto", "off"], "pin settings are auto and on, not off"),
    ],
)
def test_a_run_without_verify_rounds_or_with_the_pin_off_is_refused(
    profiles: list[str], pins: list[str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        engines(profiles, ["triton"], pins)


# --- the measured rows -------------------------------------------------------------------


def test_a_row_s_idle_and_host_loop_are_what_the_wall_leaves() -> None:
    pinned = rows()["stack/triton/pin forced"]
    assert pinned.idle_ms == pytest.approx(1.5)
    assert pinned.host_loop_ms == pytest.approx(7.5)
    assert rows()["stack/triton/no pin"].host_loop_ms == pytest.approx(7.0)
    assert rows()["stack/flashinfer/pin"].pin_forced is False


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["rows"][0].pop("wall_ms"), "lacks 'wall_ms'"),
        (lambda d: d["rows"][0].update(pin="yes"), "pin must be true or false"),
        (lambda d: d["rows"][0].update(rounds=0), "rounds must be at least 1"),
        (lambda d: d["rows"][0].update(wall_ms="slow"), "malformed"),
        (lambda d: d["rows"][0].update(gpu_busy_ms=float("nan")), "times must be finite"),
        (lambda d: d.update(rows=[]), "no rows"),
        (lambda d: d["rows"].append(d["rows"][0]), "given twice"),
        (lambda d: d.pop("cpu"), "lacks 'cpu'"),
    ],
)
def test_a_bad_host_file_gets_one_line(mutate: Any, message: str) -> None:
    data = json.loads(json.dumps(SYNTHETIC_HOST_RUN))
    mutate(data)
    with pytest.raises(ValueError, match=message) as info:
        HostRun.from_dict(data)
    assert "\n" not in str(info.value)


def test_the_table_has_a_line_per_engine_labelled_measured() -> None:
    table = host_table(run())
    assert table.startswith("MEASURED on NVIDIA H200 (host CPU a synthetic CPU), 42 layers")
    assert len(table.splitlines()) == 2 + len(SYNTHETIC_HOST_RUN["rows"])
    assert "stack/triton/pin forced" in table


# --- the Spark's host term ---------------------------------------------------------------


def test_a_pinned_round_adds_the_idle_time_scaled_by_the_cpu_factor() -> None:
    pinned = rows()["stack/triton/pin forced"]
    assert spark_host_ms(pinned, 46.0, 1.0) == pytest.approx(1.5)
    assert spark_host_ms(pinned, 46.0, 2.0) == pytest.approx(3.0)


def test_an_unpinned_round_adds_only_the_host_loop_the_gpu_does_not_cover() -> None:
    free = rows()["stack/triton/no pin"]
    assert spark_host_ms(free, 46.0, 1.0) == 0.0
    assert spark_host_ms(free, 5.0, 1.0) == pytest.approx(2.0)
    assert spark_host_ms(free, 5.0, 2.0) == pytest.approx(9.0)


def test_a_pinned_round_costs_at_least_what_the_unpinned_one_would() -> None:
    pinned = rows()["stack/triton/pin forced"]
    assert spark_host_ms(pinned, 5.0, 1.0) == pytest.approx(7.5 - 5.0)


def test_each_measured_round_adds_its_host_term_to_its_profile_s_gpu_round() -> None:
    result = host_projection(run(), {"stack": 46.0, "dspark": 76.0}, HOST_ACCEPTS, cpu_factor=1.0)
    terms = {t.label: t for t in result.terms}
    assert set(terms) == {
        "stack/triton/no pin",
        "stack/triton/pin forced",
        "stack/flashinfer/pin",
        "dspark/flashinfer/pin",
    }
    for t in terms.values():
        assert t.round_ms == pytest.approx(t.gpu_round_ms + t.host_ms)
        assert t.tpot_ms == pytest.approx(t.round_ms / t.accept_length)
        assert t.tpot_without_host_ms == pytest.approx(t.gpu_round_ms / t.accept_length)
    assert terms["stack/triton/no pin"].host_ms == 0.0
    assert terms["stack/flashinfer/pin"].host_ms == pytest.approx(1.8)
    assert terms["stack/flashinfer/pin"].accept_length == 2.68
    assert terms["dspark/flashinfer/pin"].tpot_ms == pytest.approx((76.0 + 1.0) / 5.29)


@pytest.mark.parametrize(
    ("rounds", "factor", "message"),
    [
        ({"stack": 46.0}, 0.0, "CPU factor must be positive"),
        ({"humming+fp8": 24.0}, 1.0, "no measured profile"),
    ],
)
def test_a_host_term_without_a_cpu_factor_or_a_round_is_refused(
    rounds: dict[str, float], factor: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        host_projection(run(), rounds, HOST_ACCEPTS, cpu_factor=factor)


def test_the_projection_prices_its_own_stack_and_dspark_rounds_with_the_host_term() -> None:
    plain = spark_projection(
        [load(humming()), load(humming_fp8()), load(replayssm_round()), load(dspark_round())]
    )
    assert "host" not in plain.to_dict()
    result = plain.with_host(run(), 1.5)
    assert result.host is not None
    rounds = {p.profile: p.projected_ms for p in plain.profiles}
    for t in result.host.terms:
        assert t.gpu_round_ms == rounds[t.profile]
    assert result.host.cpu_factor == 1.5
    assert result.to_dict()["host"]["terms"][0]["label"] == "stack/triton/no pin"


def run_script(
    tmp_path: Path, host: dict[str, Any], *extra: str
) -> subprocess.CompletedProcess[str]:
    """spark_projection.py over synthetic profiles with `host` as the host file."""
    paths = []
    for i, data in enumerate([humming(), humming_fp8(), replayssm_round(), dspark_round()]):
        paths.append(tmp_path / f"profile-{i}.json")
        paths[-1].write_text(json.dumps(data))
    (tmp_path / "synthetic-host-time.json").write_text(json.dumps(host))
    return subprocess.run(
        [
            sys.executable,
            str(ROOT / "lab" / "scripts" / "spark_projection.py"),
            *map(str, paths),
            "--out",
            str(tmp_path / "spark-projection.json"),
            "--host",
            str(tmp_path / "synthetic-host-time.json"),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_script_adds_the_host_term_from_a_host_file(tmp_path: Path) -> None:
    proc = run_script(tmp_path, SYNTHETIC_HOST_RUN, "--cpu-factor", "2")
    assert proc.returncode == 0, proc.stderr
    assert "Host term a round (measured on NVIDIA H200, host CPU a synthetic CPU" in proc.stdout
    assert "stack/flashinfer/pin" in proc.stdout
    host = json.loads((tmp_path / "spark-projection.json").read_text())["host"]
    assert host["cpu_factor"] == 2.0
    assert "assumed, not measured" in host["cpu_factor_why"]
    assert len(host["terms"]) == 4


def test_the_script_refuses_a_bad_host_file_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    proc = run_script(tmp_path, {**SYNTHETIC_HOST_RUN, "rows": []})
    assert proc.returncode == 2
    host = tmp_path / "synthetic-host-time.json"
    assert proc.stderr.strip() == f"error: {host}: the host-time file has no rows"
    assert not (tmp_path / "spark-projection.json").exists()


# --- the scheduler probe -----------------------------------------------------------------


def test_the_probe_records_sglang_s_decision_and_forces_the_pin_when_asked() -> None:
    stats = host_probe.HostStats()
    decide = host_probe.deciding(lambda backends: False, stats, force_pin=True)
    assert decide(("triton",)) is True
    assert (stats.declared_pin, stats.pin) == (False, True)
    decide = host_probe.deciding(lambda backends: True, stats, force_pin=False)
    assert decide(("flashinfer",)) is True
    assert (stats.declared_pin, stats.pin) == (True, True)
    decide = host_probe.deciding(lambda backends: False, stats, force_pin=False)
    assert decide(("triton",)) is False


def test_a_timed_call_returns_its_value_and_adds_its_seconds_even_when_it_raises() -> None:
    seen: list[float] = []

    def fails() -> None:
        raise RuntimeError("boom")

    assert host_probe.timed(lambda x: x + 1, seen.append)(1) == 2
    with pytest.raises(RuntimeError):
        host_probe.timed(fails, seen.append)()
    assert len(seen) == 2
    assert all(s >= 0 for s in seen)


def test_the_counters_are_read_back_as_written(tmp_path: Path) -> None:
    stats = host_probe.HostStats(declared_pin=False, pin=True, wait_s=1.5, waits=3)
    stats.write(tmp_path / "stats.json")
    assert host_probe.HostStats.read(tmp_path / "stats.json") == stats
    assert not (tmp_path / "stats.part").exists()


def test_install_wraps_the_decision_the_resolve_and_each_synchronize(monkeypatch: Any) -> None:
    """On doubles of torch and SGLang's two modules (the real ones need a GPU machine)."""
    import types

    class EventDouble:
        def synchronize(self) -> str:
            return "event"

    class FutureMapDouble:
        def resolve_seq_lens_cpu(self, batch: Any, stream_ordered: bool = False) -> Any:
            return batch

    cuda_double = types.SimpleNamespace(
        Event=EventDouble, Stream=int, synchronize=lambda: "device", __name__="torch.cuda"
    )
    scheduler_double = types.SimpleNamespace(decide_needs_cpu_seq_lens=lambda backends: False)
    managers_double = types.SimpleNamespace(
        overlap_utils=types.SimpleNamespace(FutureMap=FutureMapDouble),
        scheduler=scheduler_double,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda_double))
    monkeypatch.setitem(sys.modules, "sglang", types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "sglang.srt", types.SimpleNamespace(managers=managers_double))
    monkeypatch.setitem(sys.modules, "sglang.srt.managers", managers_double)
    stats = host_probe.HostStats()
    host_probe.install(stats, force_pin=True)
    assert scheduler_double.decide_needs_cpu_seq_lens(()) is True
    assert (stats.declared_pin, stats.pin) == (False, True)
    assert FutureMapDouble().resolve_seq_lens_cpu("batch") == "batch"
    assert EventDouble().synchronize() == "event"
    assert cuda_double.synchronize() == "device"
    assert (stats.resolves, stats.waits) == (1, 2)
    # int.synchronize does not exist: that wait is left uncounted, and named as such
    assert stats.timed_waits == ["EventDouble.synchronize", "torch.cuda.synchronize"]


# --- ling-chat's host levers, each off against all on ---------------------------------


def test_each_set_of_host_levers_off_is_one_more_engine_named_by_what_is_off() -> None:
    todo = engines(["stack"], ["triton"], ["auto"], ["", "prepared_commit", "gc_freeze+fast_cores"])
    assert [e.off for e in todo] == [(), ("prepared_commit",), ("gc_freeze", "fast_cores")]
    assert [e.name for e in todo] == [
        "stack-triton",
        "stack-triton-off-prepared_commit",
        "stack-triton-off-gc_freeze-off-fast_cores",
    ]
    with pytest.raises(ValueError, match="host levers are prepared_commit, gc_freeze, fast_cores"):
        engines(["stack"], ["triton"], ["auto"], ["gc"])


def test_an_engine_with_host_levers_off_leaves_out_only_their_patches() -> None:
    from app.backend.engine.patches.boundary import PatchPlan
    from app.levers.profiles import PROFILES

    plan = PatchPlan.for_profile(PROFILES["stack"], "/tmp/sglang.log")
    assert {"host.commit", "host.gc_freeze", "host.cores", "replayssm"} <= set(plan.patches)
    off = host_probe.without(plan, "prepared_commit,gc_freeze")
    assert set(plan.patches) - set(off.patches) == {"host.commit", "host.gc_freeze"}
    assert host_probe.without(plan, "") == plan
    with pytest.raises(KeyError):
        host_probe.without(plan, "gc")


def test_a_row_with_levers_off_has_its_own_label_and_keeps_its_gc_time() -> None:
    data = {
        "profile": "stack", "backend": "triton", "pin": False, "pin_forced": False, "rounds": 60,
        "accept_length": 4.0, "wall_ms": 1.2, "gpu_busy_ms": 0.9, "profiled_wall_ms": 1.5,
        "host_wait_ms": 0.1, "pin_ms": 0.0,
    }  # fmt: skip
    before = HostRound.from_dict(data)  # a file from before the levers: all on, GC not counted
    assert (before.off, before.gc_ms, before.label) == ((), None, "stack/triton/no pin")
    off = HostRound.from_dict({**data, "off": ["prepared_commit"], "gc_ms": 0.02})
    assert off.label == "stack/triton/no pin/off: prepared_commit" and off.gc_ms == 0.02
