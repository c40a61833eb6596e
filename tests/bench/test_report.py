"""The run's tables (levers, deltas, roofline), its plot, and its JSON form."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from app.bench.acceptance import SIMULATE_ENV, pooled_position_acceptance
from app.bench.report import (
    POSITION_NOTE,
    lever_gains,
    lever_label,
    peer_lines,
    render_run,
    table_rows,
    tables_json,
)
from app.bench.results import SCHEMA, BenchRun, ProfileResult, RooflineColumns
from app.commands.bench import read_json, write_json
from app.core.errors import ConfigError
from app.render.bars import CEILING, bar, bars
from tests.support.bench_builders import SYNTHETIC_PLAN, profile, run

NVIDIA = (("baseline", 36.09), ("humming", 39.45), ("humming+fp8", 43.94), ("stack", 102.88))
"""NVIDIA's DGX Spark decode tok/s for the four steps (perf-anchors.md §2)."""


def _nvidia_run() -> BenchRun:
    return run(*(profile(name, tps) for name, tps in NVIDIA))


def _cells(text: str, first: str) -> list[str]:
    return next(line.split() for line in text.splitlines() if line.startswith(first + " "))


@pytest.mark.parametrize(
    ("profile_name", "previous", "label"),
    [
        ("baseline", None, "baseline"),
        ("humming", "baseline", "+Humming"),
        ("humming+fp8", "humming", "+FP8 head"),
        ("stack", "humming+fp8", "+NEXTN"),
        ("stack", "baseline", "+Humming +FP8 head +NEXTN"),
        ("baseline", "stack", "-Humming -FP8 head -NEXTN"),
        ("stack", "stack", "="),
        ("dspark", "stack", "-NEXTN +DSpark"),
        ("custom", "baseline", "custom"),
    ],
)
def test_lever_label_names_what_changed(
    profile_name: str, previous: str | None, label: str
) -> None:
    assert lever_label(profile_name, previous) == label


def test_each_lever_alone_and_added_last_to_the_stack() -> None:
    # The H200 bench of 2026-11-29 (random weights): the FP8 head won alone, lost stacked.
    speeds = {"humming": 391.5, "humming+fp8": 506.5, "humming+nextn": 240.7, "stack": 196.7}
    humming, fp8, nextn = lever_gains(speeds)
    assert (humming.alone, humming.stacked) == (None, None)  # no baseline row
    assert fp8.alone == ("humming+fp8", "humming", pytest.approx(506.5 / 391.5 - 1))
    assert fp8.stacked == ("stack", "humming+nextn", pytest.approx(196.7 / 240.7 - 1))
    assert nextn.alone == ("humming+nextn", "humming", pytest.approx(240.7 / 391.5 - 1))
    assert nextn.stacked == ("stack", "humming+fp8", pytest.approx(196.7 / 506.5 - 1))


def test_a_gain_missing_its_pair_of_profiles_is_left_blank() -> None:
    gains = {g.lever: g for g in lever_gains(dict(NVIDIA))}
    assert gains["Humming"].alone == ("humming", "baseline", pytest.approx(39.45 / 36.09 - 1))
    assert gains["NEXTN"].alone is None  # only measured on top of the other two
    assert gains["NEXTN"].stacked == ("stack", "humming+fp8", pytest.approx(102.88 / 43.94 - 1))
    assert gains["FP8 head"].alone == ("humming+fp8", "humming", pytest.approx(43.94 / 39.45 - 1))
    assert gains["FP8 head"].stacked is None  # no humming+nextn row
    text = render_run(_nvidia_run())
    assert _cells(text, "NEXTN")[1:5] == ["—", "+134.1%", "(stack", "vs"]


def test_deltas_against_previous_row_and_baseline() -> None:
    rows = table_rows(_nvidia_run().profiles, "synthetic")
    assert [row.lever for row in rows] == ["baseline", "+Humming", "+FP8 head", "+NEXTN"]
    assert [row.vs_prev for row in rows] == pytest.approx(
        [None, 39.45 / 36.09 - 1, 43.94 / 39.45 - 1, 102.88 / 43.94 - 1]
    )
    assert [row.vs_baseline for row in rows] == pytest.approx(
        [0.0, 39.45 / 36.09 - 1, 43.94 / 36.09 - 1, 102.88 / 36.09 - 1]
    )


def test_a_failed_profile_is_skipped_by_the_next_rows_delta() -> None:
    failed = profile("humming", None, errors=10)
    rows = table_rows((profile("baseline", 30.0), failed, profile("stack", 60.0)), "synthetic")
    assert rows[1].vs_prev is None and rows[1].error == "10 failed requests"
    assert rows[2].vs_prev == pytest.approx(1.0)


def test_without_a_baseline_row_the_first_row_is_the_reference() -> None:
    profiles = (profile("humming", 40.0), profile("stack", 50.0))
    rows = table_rows(profiles, "synthetic")
    assert rows[1].vs_baseline == pytest.approx(0.25)
    header = render_run(run(*profiles)).splitlines()[2].split()
    assert header[3:8] == ["reps", "vs", "prev", "vs", "humming"]


def test_speed_table_shows_each_lever_with_its_deltas() -> None:
    text = render_run(_nvidia_run())
    assert text.splitlines()[0] == (
        "synthetic: 32768 in / 2048 out, greedy, ignore_eos; "
        "2 reps x 5 prompts after 1 warm-up, batch 1"
    )
    assert "vs prev  vs baseline" in text.splitlines()[2]
    humming = _cells(text, "humming")
    assert humming[:3] + humming[4:6] == ["humming", "+Humming", "39.45", "+9.3%", "+9.3%"]
    fp8 = _cells(text, "humming+fp8")
    assert fp8[:4] + fp8[5:7] == ["humming+fp8", "+FP8", "head", "43.94", "+11.4%", "+21.8%"]
    stack = _cells(text, "stack")
    assert stack[:3] + stack[4:6] == ["stack", "+NEXTN", "102.88", "+134.1%", "+185.1%"]
    assert stack[6:9] == ["9.72", "10.69", "4.000"]  # TPOT p50, p95 ms, TTFT s


def test_each_row_shows_the_spread_of_its_repetitions() -> None:
    # The H200 bench of 2026-11-29: one boot per profile, two repetitions each.
    rows = (
        profile("humming+nextn", 240.7, rep_decode_tps=(242.7, 237.0)),
        profile("stack", 196.7, rep_decode_tps=(187.5, 199.2)),
        profile("humming", 391.5, rep_decode_tps=(391.5,)),
    )
    text = render_run(run(*rows))
    assert _cells(text, "humming+nextn")[2:4] == ["240.70", "237.0-242.7"]
    assert _cells(text, "stack")[3:5] == ["196.70", "187.5-199.2"]  # the lever is "+FP8 head"
    assert _cells(text, "humming")[4:6] == ["391.50", "—"]  # one repetition has no spread
    assert "deltas inside it are noise" in text


def test_boots_get_their_own_column_only_when_a_profile_was_booted_again() -> None:
    rows = (
        profile("humming", 391.5, rep_decode_tps=(380.0, 402.0), boot_decode_tps=(385.0, 398.0)),
        profile("stack", 410.0, rep_decode_tps=(300.0, 420.0), boot_decode_tps=(330.0, 415.0)),
    )
    text = render_run(run(*rows))
    assert text.splitlines()[2].split()[2:6] == ["tok/s", "reps", "boots", "vs"]
    assert _cells(text, "humming")[2:5] == ["391.50", "380.0-402.0", "385.0-398.0"]
    assert "boots: the slowest and fastest engine boot" in text
    single = render_run(run(profile("humming", 391.5)))
    assert "boots" not in single.splitlines()[2] and "boots:" not in single


def test_a_run_saved_before_boots_existed_reads_and_renders() -> None:
    saved = Path(__file__).parents[1] / "fixtures" / "bench-run-before-boots.json"
    text = render_run(read_json(saved))
    assert _cells(text, "stack")[3:5] == ["196.72", "187.5-199.2"]
    assert "boots" not in text.splitlines()[2]


def test_accept_length_accuracy_and_errors_columns() -> None:
    row = profile(
        "stack",
        50.0,
        accept_length=2.68,
        accept_length_median=2.5,
        accept_positions=pooled_position_acceptance([(10, 20, 30, 40)]),
        accuracy=0.925,
        errors=1,
    )
    text = render_run(run(row))
    cells = _cells(text, "stack")
    assert cells[-6:] == ["2.68", "2.50", "0.90/0.70/0.40", "92.5%", "1", "—"]
    assert POSITION_NOTE in text


def test_rows_without_a_histogram_show_no_positions() -> None:
    text = render_run(run(profile("baseline", 36.0)))
    assert _cells(text, "baseline")[-4] == "—"
    assert POSITION_NOTE not in text


def test_a_faked_accept_length_is_labelled_in_the_table_and_json(tmp_path: Path) -> None:
    faked = replace(
        profile("dspark", 120.0, accept_positions=pooled_position_acceptance([(0, 0, 2, 2)])),
        proof={"profile": "dspark", "lines": [], "facts": {"env": {SIMULATE_ENV: "3.5"}}},
    )
    bench = run(profile("stack", 100.0), faked)
    text = render_run(bench)
    assert _cells(text, "dspark")[:4] == ["dspark", "(simulated", "accept", "3.5)"]
    assert _cells(text, "stack")[:2] == ["stack", "stack"]  # measured: no label
    assert f"dspark: acceptance simulated, not measured ({SIMULATE_ENV}=3.5)" in text
    path = tmp_path / "run.json"
    write_json(bench, path)
    data = json.loads(path.read_text())
    assert [p["simulated_accept_length"] for p in data["profiles"]] == [None, 3.5]
    assert [r["simulated_accept_length"] for r in data["tables"]["synthetic"]] == [None, 3.5]
    assert data["profiles"][1]["workloads"][0]["summary"]["accept_positions"] == {
        "histogram": [0, 0, 2, 2],
        "rates": [1.0, 1.0, 0.5],
        "accept_length": 3.5,
    }
    assert read_json(path) == bench


def _peer(decode_tps: float | None, **overrides: Any) -> ProfileResult:
    """The row of `bench --peer`: its engine names what it ran."""
    result = profile("stock-sglang", decode_tps, **overrides)
    return replace(result, engine={"peer": "stock SGLang's server", "sglang": "0.5.23"}, proof=None)


def test_a_peer_row_is_marked_and_compared_with_the_default_profile() -> None:
    rows = table_rows(
        [
            profile("baseline", 36.0),
            profile("stack", 100.0, accept_length=3.75),
            _peer(80.0, accept_length=3.5),
        ],
        "synthetic",
    )
    peer = rows[2]
    assert (peer.label, peer.lever) == ("stock-sglang (peer)", "peer")
    assert peer.peer == "stock SGLang's server"
    assert peer.peer_ratio == ("stack", pytest.approx(0.8))
    assert peer.vs_baseline == pytest.approx(80 / 36 - 1)
    assert [r.peer_ratio for r in rows[:2]] == [None, None]
    assert peer_lines(peer, rows) == [
        "stock-sglang (peer): stock SGLang's server",
        "stock-sglang: 0.80x stack's decode tok/s (80.00 against 100.00), accept 3.50 against 3.75",
    ]
    text = render_run(run(profile("stack", 100.0), _peer(80.0)))
    assert "stock-sglang: 0.80x stack's decode tok/s (80.00 against 100.00)\n" in text


def test_without_the_default_profile_a_peer_is_compared_with_the_reference_row() -> None:
    rows = table_rows([profile("humming", 50.0), _peer(80.0)], "synthetic")
    assert rows[1].peer_ratio == ("humming", pytest.approx(1.6))
    alone = table_rows([_peer(80.0)], "synthetic")  # never against itself
    assert alone[0].peer_ratio is None
    assert peer_lines(alone[0], alone) == ["stock-sglang (peer): stock SGLang's server"]


def test_roofline_table_and_plot_ceiling() -> None:
    columns = RooflineColumns(33792, 4.793e9, 57.0, 210.6, 0.7714, mtp_ceiling=None)
    spec = RooflineColumns(33792, 4.793e9, 57.0, 150.0, 0.55, mtp_ceiling=1.35)
    text = render_run(
        run(profile("humming+fp8", 43.94, roofline=columns), profile("stack", 70.0, roofline=spec))
    )
    assert "profile      context  GB/step  ceiling tok/s   GB/s  % of 273  MTP a/r" in text
    assert _cells(text.split("GB/step")[1], "humming+fp8") == [
        "humming+fp8", "33792", "4.793", "57.0", "210.6", "77.1%", "—",
    ]  # fmt: skip
    assert _cells(text.split("GB/step")[1], "stack")[-1] == "1.35"
    assert f"decode tok/s ({CEILING} bandwidth ceiling at 273 GB/s)" in text
    plot = text.split("bandwidth ceiling at 273 GB/s)\n")[1].splitlines()
    scale = 57.0 * 1.35  # the stack row's ceiling is the longest item: 48 cells
    assert plot[0].index(CEILING) == len("humming+fp8  ") + int(57.0 / scale * 48)
    assert plot[1].index(CEILING) == len("humming+fp8  ") + 47
    assert plot[1].endswith("70.00")


def test_failed_profile_is_listed_under_its_table() -> None:
    failed = ProfileResult(profile="stack", error="no GPU")
    text = render_run(run(profile("baseline", 36.0), failed))
    assert "stack: no GPU" in text
    assert _cells(text, "stack").count("—") == 16  # every column but profile and lever


def test_json_round_trip(tmp_path: Path) -> None:
    original = _nvidia_run()
    path = tmp_path / "run.json"
    write_json(original, path)
    assert read_json(path) == original


def test_json_schema_keys(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    write_json(_nvidia_run(), path)
    data = json.loads(path.read_text())
    assert set(data) == {
        "schema", "created_at", "git", "plan", "profiles", "tables", "published", "host_time",
    }  # fmt: skip
    assert data["schema"] == SCHEMA
    assert data["git"] == {"commit": "abc123", "dirty": False}
    assert data["plan"]["workloads"] == [SYNTHETIC_PLAN]
    first = data["profiles"][0]
    assert set(first) == {
        "profile", "error", "engine", "proof", "simulated_accept_length", "workloads",
        "host_time",
    }  # fmt: skip
    assert first["simulated_accept_length"] is None
    workload = first["workloads"][0]
    assert set(workload) == {"name", "summary", "roofline", "requests"}
    assert set(workload["summary"]) >= {
        "tpot_s", "decode_tps", "ttft_s", "latency_mean_s", "latency_p50_s", "latency_p95_s",
        "accept_length", "accept_length_median", "accuracy", "errors", "truncated",
    }  # fmt: skip
    request = workload["requests"][0]
    assert set(request) == {
        "rep", "index", "stats", "finish_reason", "error", "expected", "extracted", "correct",
    }  # fmt: skip
    assert request["stats"]["verify_rounds"] == 2
    assert data["tables"]["synthetic"][1] == {
        "profile": "humming",
        "lever": "+Humming",
        "decode_tps": 39.45,
        "boot_decode_tps": [],
        "boot_median_tps": None,
        "vs_prev": pytest.approx(39.45 / 36.09 - 1),
        "vs_baseline": pytest.approx(39.45 / 36.09 - 1),
        "simulated_accept_length": None,
        "peer": None,
        "peer_ratio": None,
    }
    published = data["published"]["synthetic"]["humming"]
    assert published["completed"] == 1 and published["completion_tokens"] == 5
    assert published["mcnemar_vs_baseline"] is None  # nothing graded


def test_tables_json_matches_the_rows() -> None:
    table = tables_json(_nvidia_run())["synthetic"]
    assert [row["lever"] for row in table] == ["baseline", "+Humming", "+FP8 head", "+NEXTN"]


@pytest.mark.parametrize(
    ("text", "message"),
    [("{not json", "not a ling-chat bench result"), ('{"schema": "other/1"}', "schema")],
)
def test_reading_something_else_is_a_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_json(path)


@pytest.mark.parametrize(
    ("value", "scale", "width", "expected"),
    [
        (4.0, 8.0, 4, "██"),
        (1.0, 8.0, 1, "▏"),
        (3.0, 8.0, 2, "▊"),  # 0.75 of a cell: 6 eighths
        (9.0, 8.0, 2, "██"),  # clipped
        (0.0, 8.0, 2, ""),
    ],
)
def test_bar_in_eighths(value: float, scale: float, width: int, expected: str) -> None:
    assert bar(value, scale, width) == expected


def test_bars_scale_to_the_longest_and_mark_ceilings() -> None:
    items = [("a", 10.0, 20.0), ("bb", 20.0, None), ("c", None, None), ("d", 16.0, 8.0)]
    assert bars(items, width=10).splitlines() == [
        "a   █████    ┆  10.00",
        "bb  ██████████  20.00",
        "c               —",
        "d   ████████    16.00",  # past its ceiling: no mark
    ]
