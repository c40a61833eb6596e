"""`ling-chat bench --suite nvidia|recipes` end to end over engine doubles and a Hub double."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.inputs import datasets
from app.commands import bench
from app.core.errors import ConfigError
from tests.support.bench_cli import bench_main
from tests.support.bench_doubles import ScriptedEngineDouble, sample
from tests.support.gsm8k_hub import HubDouble


class _PerProfileEngines(types.ModuleType):
    """Stands in for app.bench.engine: each profile's engine double has its own script."""

    def __init__(self, scripts: dict[str, list[Any]]) -> None:
        super().__init__("app.bench.engine")
        self.scripts = scripts
        self.journal: list[str] = []
        self.engines: dict[str, ScriptedEngineDouble] = {}

    def bench_engine_factory(self, config: Any, *, require_proof: bool = True) -> Any:
        async def start(name: str) -> ScriptedEngineDouble:
            facts = {"config": {}, "proof": None, "model_config": LING_3_FLASH_CONFIG}
            engine = ScriptedEngineDouble(name, list(self.scripts[name]), self.journal, facts)
            self.engines[name] = engine
            return engine

        return start


def _engines(monkeypatch: pytest.MonkeyPatch, scripts: dict[str, list[Any]]) -> _PerProfileEngines:
    module = _PerProfileEngines(scripts)
    monkeypatch.setitem(sys.modules, "app.bench.engine", module)
    monkeypatch.setattr(bench, "prepare_engines", lambda plan, configs: None)
    return module


def _model(tmp_path: Path) -> str:
    model = tmp_path / "ling"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return str(model)


SYNTHETIC = sample(ttft=2.0, tpot=0.03, tokens=2048, prompt_tokens=32768)


def _answer(text: str) -> Any:
    return sample(ttft=0.2, tpot=0.02, tokens=101, text=text, finish="stop")


def test_nvidia_suite_reports_the_published_fields_and_mcnemar(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hub = HubDouble(tmp_path)
    monkeypatch.setattr(datasets, "hf_hub_download", hub)
    # The gold answers of the first three test questions are 27, 155 and 150.
    first, second = _answer("<think>27?</think>The answer is 27."), _answer("It is 155.")
    warm = [SYNTHETIC, SYNTHETIC, _answer("warm-up")]
    baseline = [*warm, first, second, _answer("The answer is 5.")]
    stack = [*warm, _answer("no idea"), second, _answer("150")]
    module = _engines(monkeypatch, {"baseline": baseline, "stack": stack})
    out = tmp_path / "run.json"
    argv = ["--suite", "nvidia", "--questions", "3", "--num-prompts", "1", "--reps", "1"]
    argv += ["--profiles", "baseline,stack", "--json", str(out), "--model", _model(tmp_path)]

    assert bench_main(argv) == 0

    synthetic_call, gsm8k_call = module.engines["stack"].calls[1], module.engines["stack"].calls[3]
    assert len(synthetic_call["input_ids"]) == 32768
    assert synthetic_call["sampling_params"]["max_new_tokens"] == 2048
    assert gsm8k_call["chat_template"] == {"enable_thinking": True}
    assert gsm8k_call["sampling_params"]["sampling_seed"] == 42
    assert gsm8k_call["sampling_params"]["max_new_tokens"] == 32768
    stdout = capsys.readouterr().out
    assert "gsm8k: 3 test questions, 5-shot from train, T=0.6" in stdout
    assert "gsm8k, as the published summaries count it" in stdout
    stack_row = next(
        line.split()
        for line in stdout.split("gsm8k, as the published")[1].splitlines()
        if line.startswith("stack ")
    )
    assert stack_row[-4:] == ["stop:3", "66.67%", "1/1", "1.0000"]
    data = json.loads(out.read_text())
    assert data["plan"]["suite"] == "nvidia"
    stack = data["published"]["gsm8k"]["stack"]
    assert stack["aggregate_decode_tokens_per_s"] == pytest.approx(50.0)
    assert stack["decode_tokens_excluding_first"] == 300
    assert stack["mcnemar_vs_baseline"]["only_reference"] == 1
    assert stack["mcnemar_vs_baseline"]["only_this"] == 1
    assert data["published"]["gsm8k"]["baseline"]["correct"] == 2


def test_recipes_suite_sends_each_workload_with_its_own_seed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    forced = sample(ttft=0.3, tpot=0.02, tokens=1024)
    module = _engines(monkeypatch, {"stack": [forced] * 6})
    argv = ["--suite", "recipes", "--num-prompts", "1", "--reps", "1", "--seed", "1000"]
    assert bench_main([*argv, "--profiles", "stack", "--model", _model(tmp_path)]) == 0
    calls = module.engines["stack"].calls
    assert [c["prompt"][:10] if c["prompt"] else None for c in calls] == [
        "[req 1000]", "[req 1001]", "[req 1002]", "[req 1003]", None, None,
    ]  # fmt: skip
    assert calls[0]["chat_template"] == {"enable_thinking": False}
    assert len(calls[5]["input_ids"]) == 8192 and calls[4]["input_ids"] != calls[5]["input_ids"]
    assert all(c["sampling_params"]["min_new_tokens"] == 1024 for c in calls)
    stdout = capsys.readouterr().out
    for name in ("code: the code prompt", "prose: the prose prompt", "random-8k: 8192 random"):
        assert f"{name}" in stdout
    assert "random-8k, as the published summaries count it" in stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--suite", "recipes", "--workload", "synthetic"], "drop --workload and --dataset"),
        (["--suite", "nvidia", "--dataset", "x.jsonl"], "drop --workload and --dataset"),
        (["--questions", "10"], "--questions is for --suite nvidia"),
        (["--suite", "recipes", "--questions", "10"], "--questions is for --suite nvidia"),
    ],
)
def test_suite_flags_that_contradict_are_refused(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        bench_main(argv)
