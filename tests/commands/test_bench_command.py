"""`ling-chat bench` end to end over an engine double, and `bench compare` on two files."""

from __future__ import annotations

import importlib
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.results import BenchRun
from app.commands import bench
from app.core.errors import BackendError, ConfigError
from tests.support.bench_builders import profile, run
from tests.support.bench_cli import bench_main
from tests.support.bench_doubles import ScriptedEngineDouble, sample

FIXTURE = Path(__file__).parent.parent / "fixtures" / "gsm8k_small.jsonl"


class _EngineModule(types.ModuleType):
    """Stands in for app.bench.engine: its factory starts scripted engine doubles."""

    def __init__(self, script: list[Any]) -> None:
        super().__init__("app.bench.engine")
        self.script = script
        self.journal: list[str] = []
        self.calls: list[tuple[Any, Any]] = []

    def bench_engine_factory(self, config: Any, *, require_proof: bool = True) -> Any:
        self.calls.append((config, require_proof))

        async def start(name: str) -> ScriptedEngineDouble:
            self.journal.append(f"start {name}")
            facts = {"config": {}, "proof": None, "model_config": LING_3_FLASH_CONFIG}
            return ScriptedEngineDouble(name, list(self.script), self.journal, facts=facts)

        return start


@pytest.fixture(autouse=True)
def _checkpoint_at_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checkpoint needs no download here (tests/backend/engine/test_download.py covers it)."""
    monkeypatch.setattr(bench, "fetch_model", lambda model_path: model_path)


def _engine(monkeypatch: pytest.MonkeyPatch, script: list[Any]) -> _EngineModule:
    module = _EngineModule(script)
    monkeypatch.setitem(sys.modules, "app.bench.engine", module)
    monkeypatch.setattr(bench, "prepare_engines", lambda plan, configs: None)
    return module


SMALL = ["--input-len", "8", "--output-len", "5", "--num-prompts", "2", "--reps", "1"]
SYNTHETIC_REPLY = sample(ttft=0.5, tpot=0.02, tokens=5, prompt_tokens=8)


def test_bench_runs_each_profile_and_writes_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The reasoning warm-up, then the questions whose answers are 21 and 700.
    answers = ["The answer is 21.", "The answer is 21.", "The answer is 7."]
    reasoning = [sample(ttft=0.1, tpot=0.01, tokens=9, text=t, finish="stop") for t in answers]
    module = _engine(monkeypatch, [SYNTHETIC_REPLY] * 3 + reasoning)
    out = tmp_path / "run.json"
    model = tmp_path / "ling"
    model.mkdir()
    (model / "config.json").write_text("{}")
    argv = [*SMALL, "--profiles", "baseline,stack", "--dataset", str(FIXTURE), "--json", str(out)]
    argv += ["--model", str(model), "--sglang-arg", "speculative_num_steps=2"]

    assert bench_main(argv) == 0

    config, require_proof = module.calls[0]
    assert config.model_path == str(model)
    assert config.overrides == {"speculative_num_steps": 2}
    assert require_proof
    assert [line for line in module.journal if not line.startswith("generate")] == [
        "start baseline", "shutdown baseline", "start stack", "shutdown stack",
    ]  # fmt: skip
    stdout, stderr = capsys.readouterr()
    assert "synthetic: 8 in / 5 out, greedy, ignore_eos; 1 reps x 2 prompts" in stdout
    assert "reasoning: " in stdout and "5-shot CoT, T=0.6 top_p=0.95 top_k=29" in stdout
    assert "baseline: starting the engine" in stderr
    data = json.loads(out.read_text())
    result = BenchRun.from_dict(data)
    assert [p.profile for p in result.profiles] == ["baseline", "stack"]
    reasoning_summary = result.profiles[0].workload("reasoning")
    assert reasoning_summary is not None
    assert reasoning_summary.summary.accuracy == 0.5
    assert result.profiles[0].workload("synthetic").roofline is not None  # type: ignore[union-attr]
    assert result.plan["engine_overrides"] == {"speculative_num_steps": 2}
    assert result.git is None or len(result.git["commit"]) == 40


def test_boots_start_each_profile_again_in_rotation(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    module = _engine(monkeypatch, [SYNTHETIC_REPLY] * 3)
    out = tmp_path / "run.json"
    argv = [*SMALL, "--profiles", "humming,stack", "--boots", "2", "--json", str(out)]
    assert bench_main(argv) == 0
    starts = [line for line in module.journal if line.startswith("start")]
    assert starts == ["start humming", "start stack"] * 2
    stdout, stderr = capsys.readouterr()
    assert "1 reps x 2 prompts after 1 warm-up, batch 1, on each of 2 engine boots" in stdout
    assert "stack (boot 2/2): starting the engine" in stderr
    result = BenchRun.from_dict(json.loads(out.read_text()))
    assert result.plan["boots"] == 2
    summary = result.profiles[1].workloads[0].summary
    assert summary.requests == 4 and summary.boot_decode_tps == pytest.approx((50.0, 50.0))


def test_a_failed_request_makes_the_exit_status_1(monkeypatch: pytest.MonkeyPatch) -> None:
    _engine(monkeypatch, [SYNTHETIC_REPLY, BackendError("lost"), SYNTHETIC_REPLY])
    assert bench_main([*SMALL, "--profiles", "baseline"]) == 1


def test_profile_flag_runs_one_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _engine(monkeypatch, [SYNTHETIC_REPLY] * 3)
    assert bench_main([*SMALL, "--profile", "humming"]) == 0
    assert module.journal[0] == "start humming"
    with pytest.raises(ConfigError, match="not both"):
        bench_main([*SMALL, "--profile", "humming", "--profiles", "stack"])


def test_a_dspark_profile_fetches_its_draft_after_the_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _engine(monkeypatch, [SYNTHETIC_REPLY] * 6)
    fetched: list[str] = []
    monkeypatch.setattr(bench, "fetch_model", fetched.append)
    argv = [*SMALL, "--profiles", "stack,dspark", "--model", "org/ling", "--dspark-draft", "org/d"]
    assert bench_main(argv) == 0
    assert fetched == ["org/ling", "org/d"]


def test_reasoning_without_a_dataset_is_refused() -> None:
    with pytest.raises(ConfigError, match="needs --dataset"):
        bench_main(["--workload", "reasoning"])


def test_json_into_a_missing_directory_is_refused_before_running(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such directory"):
        bench_main(["--json", str(tmp_path / "missing" / "run.json")])


def test_a_missing_model_path_is_one_line_before_any_profile_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from app.cli import main

    module = _engine(monkeypatch, [SYNTHETIC_REPLY] * 3)
    missing = tmp_path / "missing"
    assert main(["bench", *SMALL, "--model", str(missing)]) == 1
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"ling-chat: error: model path {missing} does not exist\n")
    assert module.calls == [] and module.journal == []


@pytest.mark.parametrize(
    "argv",
    [
        ["--profiles", "baseline,turbo"],
        ["--profiles", "stack,stack"],  # pooled as if booted twice: --boots says so
        ["--output-len", "1"],
        ["--warmup", "-1"],
        ["--boots", "0"],
        ["--peer", "vllm"],
        ["--peer-wait", "0"],
    ],
)
def test_bad_flags_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        bench_main(argv)
    assert exc.value.code == 2


def test_missing_engine_extra_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("app.bench.engine")

    def missing(name: str) -> Any:
        raise ModuleNotFoundError("No module named 'sglang'", name="sglang")

    module.__getattr__ = missing  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "app.bench.engine", module)
    with pytest.raises(BackendError, match=r"pip install 'ling-chat\[engine\]'"):
        bench_main(SMALL)


def test_compare_flags_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    bench.write_json(run(profile("baseline", 36.0), profile("stack", 100.0)), a)
    bench.write_json(run(profile("baseline", 37.0), profile("stack", 80.0)), b)

    assert bench_main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    speed = next(line for line in out.splitlines() if line.startswith("stack     decode"))
    assert speed.split()[-5:] == ["100.00", "80.00", "-20.00", "(-20.0%)", "REGRESSION"]
    assert out.rstrip().endswith("2 regressions beyond 5%")

    assert bench_main(["compare", str(a), str(b), "--threshold", "30"]) == 0
    assert bench_main(["compare", str(b), str(a)]) == 0  # the reverse is an improvement


def test_compare_of_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        bench_main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")])


def test_cli_routes_bench_compare(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        cli = importlib.import_module("app.cli")
    except ImportError as exc:  # other command modules are still being written
        pytest.skip(f"app.cli does not import yet: {exc}")
    a = tmp_path / "a.json"
    bench.write_json(run(profile("baseline", 36.0)), a)
    assert cli.main(["bench", "compare", str(a), str(a)]) == 0
    assert "0 regressions beyond 5%" in capsys.readouterr().out
    assert cli.main(["bench", "compare", str(a), str(tmp_path / "missing.json")]) == 1
    assert "ling-chat: error:" in capsys.readouterr().err
