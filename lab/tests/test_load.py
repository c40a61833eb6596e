"""The load benchmark's rows, its table and choice, and the Spark load projection (its
script's output and JSON). The rows are synthetic: figures chosen here, at a 12-layer
checkpoint's scale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.research.load_bench import (
    READERS,
    DiskRead,
    LoadBench,
    LoadRow,
    fastest_passed,
    median_row,
    table,
)
from lab.research.load_projection import SparkAssumptions, project
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
GB = 10**9
PROOF = "stack: 8 pass, 0 fail, 0 off"


def row(fmt: str, cold: bool, read_s: float, **changes: object) -> LoadRow:
    fields: dict[str, object] = {
        "format": fmt,
        "cold": cold,
        "booted": True,
        "proof": PROOF,
        "proof_ok": True,
        "reader": READERS[fmt],
        "passes": 1,
        "bytes": 18 * GB,
        "seconds": {"read": read_s, "process": 2.0, "repack": 3.0, "fp8_head": 1.5},
        "boot_s": 60.0,
    }
    return LoadRow(**{**fields, **changes})  # type: ignore[arg-type]


def projection(*args: str) -> subprocess.CompletedProcess[str]:
    """lab/scripts/spark_load_projection.py run with `args`."""
    script = ROOT / "lab" / "scripts" / "spark_load_projection.py"
    return subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, check=False
    )


def bench(*rows: LoadRow) -> LoadBench:
    disk = DiskRead(bytes=18 * GB, seconds=6.0, dropped_by="fadvise", warm_seconds=1.5)
    return LoadBench(layers=12, checkpoint_bytes=18 * GB, disks=[disk], rows=list(rows))


def test_the_fastest_is_the_shortest_load_that_passed_and_read_with_its_own_reader() -> None:
    rows = [
        row("auto", True, 9.0),
        row("fastsafetensors", True, 4.0, reader=READERS["auto"]),  # fell back: not chosen
        row("instanttensor", True, 3.0, proof_ok=False, failed=["FP8 LM head: bfloat16"]),
        row("auto-nommap", True, 7.0),
        row("auto", False, 2.0),
    ]
    assert fastest_passed(rows, cold=True) == ("auto-nommap", rows[3].load_s)
    assert fastest_passed(rows, cold=False) == ("auto", rows[4].load_s)
    assert fastest_passed(rows[1:3], cold=True) is None


def test_the_table_has_every_row_the_disk_and_one_line_per_failure() -> None:
    text = table(
        bench(
            row("auto", True, 9.0),
            row("fastsafetensors", True, 4.0, reader=READERS["auto"]),
            LoadRow("instanttensor", True, booted=False, error="ImportError: no instanttensor"),
        )
    )
    assert "disk: 3.00 GB/s read with the cache dropped (fadvise), 12.00 GB/s" in text
    assert "auto             cold  own     2.00   1.00" in text  # 18 GB over 9 s, x1 of it
    assert (
        "fastsafetensors cold: FELL BACK: ran buffered_multi_thread_safetensors_weights_iterator, "
        "not fastsafetensors_weights_iterator"
    ) in text
    assert "instanttensor cold: FAILED to boot: ImportError: no instanttensor" in text
    assert "fastest that passed, cold: auto (15.5 s load, median)" in text
    assert "fastest that passed, warm: none" in text


def test_the_choice_takes_each_format_s_median_and_the_spread_is_printed() -> None:
    rows = [
        row("auto", True, 9.0),
        row("auto", True, 5.0),
        row("auto", True, 20.0),
        row("instanttensor", True, 7.0),
        row("instanttensor", True, 8.0),
        row("instanttensor", True, 1.0, draft_reads_all=True),  # not ling-chat's load
    ]
    # instanttensor's median 14.0 s beats auto's 15.5 s; its draft-reads-all row is not counted
    assert fastest_passed(rows, cold=True) == ("instanttensor", 14.0)
    assert median_row(rows[3:5]) is rows[4]  # of two, the slower: a projection errs long
    text = table(bench(*rows))
    assert "spread, auto cold: load 15.5 s median, 11.5-26.5 s over 3 runs" in text
    assert "spread, instanttensor cold: load 14.0 s median, 13.5-14.5 s over 2 runs" in text
    assert "instanttensor    cold  all " in text
    assert "fastest that passed, cold: instanttensor (14.0 s load, median)" in text


def test_a_record_round_trips_and_a_bad_one_is_refused() -> None:
    record = bench(row("auto", True, 9.0))
    assert LoadBench.from_dict(json.loads(json.dumps(record.to_dict()))) == record
    with pytest.raises(ValueError, match="not a load benchmark record"):
        LoadBench.from_dict({"layers": 12})


def test_the_projection_reads_at_the_slower_of_disk_and_pipeline_and_scales_the_rest() -> None:
    record = bench(row("auto", True, 9.0), row("auto", False, 4.5))  # pipeline 4 GB/s warm
    spark = SparkAssumptions(disk_gbps=5.0, cpu_factor=1.0, gpu_slowdown=2.0)
    load = project(record, "auto", spark)
    assert load.read_s == pytest.approx(66 / 4.0)  # the pipeline, not the disk, limits it
    assert not load.disk_bound
    assert load.repack_s == pytest.approx(3.0 * 66 / 18 * 2.0)
    assert load.fp8_head_s == pytest.approx(1.5 * 2.0)  # one head at any depth
    assert load.load_s == pytest.approx(66 / 4 + (2.0 + 3.0) * 66 / 18 * 2 + 3.0)
    all_again = row("auto", True, 9.0, bytes=36 * GB, passes=2, draft_reads_all=True)
    twice = project(bench(all_again), "auto", spark, draft_reads_all=True)
    assert twice.read_bytes == pytest.approx(132e9)  # the draft read every shard again
    own = project(bench(row("auto", True, 9.0, bytes=19 * GB, passes=2)), "auto", spark)
    assert own.read_bytes == pytest.approx(67e9)  # its one NEXTN layer's 1 GB at any depth
    faster = project(record, "auto", SparkAssumptions(disk_gbps=2.0, gpu_slowdown=2.0))
    assert faster.disk_bound and faster.read_s == pytest.approx(33.0)
    others = (2.0 + 3.0) * 66 / 18 * 2 + 3.0
    assert load.break_even_disk_gbps == pytest.approx(66 / (90 - others))  # the slowest disk
    slow_gpu = project(record, "auto", SparkAssumptions(gpu_slowdown=20.0))
    assert slow_gpu.break_even_disk_gbps is None  # its other stages alone pass 90 s
    # direct I/O reads the disk warm too: its fastest row, cold here, bounds its pipeline
    direct = bench(row("instanttensor", True, 9.0), row("instanttensor", False, 12.0))
    assert project(direct, "instanttensor", spark).pipeline_gbps == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no passing row of format 'instanttensor'"):
        project(record, "instanttensor")


def test_the_script_prints_the_projection_and_writes_its_json(tmp_path: Path) -> None:
    record = bench(row("auto", True, 9.0), row("auto", False, 1.8))
    path = tmp_path / "load-bench.json"
    path.write_text(json.dumps(record.to_dict()))
    out = tmp_path / "projection.json"
    done = projection(str(path), "--disk-gbps", "3", "--gpu-slowdown", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("PROJECTION, not a measurement")
    assert "the recipe measured 342 s; goal 90 s" in done.stdout
    assert "chosen: auto, the fastest cold load that passed on the H200" in done.stdout
    saved = json.loads(out.read_text())
    assert saved["chosen"] == "auto"
    assert saved["projections"][0]["read_s"] == pytest.approx(22.0)  # 66 GB at the 3 GB/s disk


def test_the_script_refuses_a_file_that_is_not_a_benchmark_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("[]")
    done = projection(str(path))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "bad.json" in done.stderr


@pytest.mark.slow
def test_the_benchmark_boots_each_run_and_prints_its_table_on_the_engine_double(
    tmp_path: Path,
) -> None:
    """The GPU script's own flow, SGLang a double writing recorded progress: rows as they
    come, the fallback named, the table, the JSON."""
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    header = json.dumps({"x": {"dtype": "U8", "shape": [4096], "data_offsets": [0, 4096]}})
    shard = len(header).to_bytes(8, "little") + header.encode() + bytes(4096)
    (checkpoint / "model-00001-of-00001.safetensors").write_bytes(shard)
    (checkpoint / ".ling-chat-complete").write_text("12")  # written once, reused
    record = tmp_path / "load-bench.json"
    double = ROOT / "tests" / "fixtures" / "engine_double"
    done = subprocess.run(
        [
            sys.executable,
            str(double / "load_bench_session.py"),
            str(tmp_path / "out"),
            "--checkpoint",
            str(checkpoint),
            "--runs",
            "auto:cold,fastsafetensors:warm,auto:cold:all",
            "--json",
            str(record),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=scaled(180),
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(double), str(ROOT)])},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "checkpoint: reusing" in out and "disk: " in out
    assert "== auto cold: passed (stack: " in out
    assert "== fastsafetensors warm: FELL BACK: ran buffered_multi_thread" in out
    assert "fastest that passed, cold: auto (43.5 s load, median)" in out  # 31.5+2.0+6.9+3.1
    saved = LoadBench.from_dict(json.loads(record.read_text()))
    assert "== auto cold draft reads all: passed (stack: " in out
    logs = {
        run: "".join(f.read_text() for f in (tmp_path / "out" / run).rglob("*.log"))
        for run in ("auto-cold", "auto-cold-all")
    }
    assert "draft_own_shards=True" in logs["auto-cold"]  # the product's plan
    assert "draft_own_shards=False" in logs["auto-cold-all"]  # SGLang's own draft load
    assert [(row.format, row.cold, row.draft_reads_all, row.passed) for row in saved.rows] == [
        ("auto", True, False, True),
        ("fastsafetensors", False, False, False),
        ("auto", True, True, True),
    ]
    assert saved.rows[0].seconds["repack"] == 6.9 and saved.rows[0].passes == 1
    assert len(saved.disks) == 1 and saved.checkpoint_bytes == 4096


def test_the_script_projects_the_gpu_stages_at_both_bounds_by_default(tmp_path: Path) -> None:
    path = tmp_path / "load-bench.json"
    path.write_text(json.dumps(bench(row("auto", True, 9.0)).to_dict()))
    out = tmp_path / "projection.json"
    done = projection(str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "GPU stages x1.0 slower" in done.stdout and "GPU stages x17.6 slower" in done.stdout
    slowdowns = [
        p["assumptions"]["gpu_slowdown"] for p in json.loads(out.read_text())["projections"]
    ]
    assert slowdowns == [1.0, pytest.approx(4800 / 273)]
