"""The preflight runs before anything loads, for every command that starts the engine."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app import launch
from app.cli import main
from tests.support.preflight import HEALTHY_SPARK
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parent.parent.parent
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
COMMANDS = [["prepare"], ["serve"], ["bench"], ["doctor"], []]
"""Every command that starts the in-process engine ([]: the chat)."""


@pytest.mark.parametrize("command", COMMANDS)
def test_a_refused_preflight_exits_3_with_one_line_per_failure_before_anything_loads(
    command: list[str], model: Path, machine: dict[str, Any], capfd: pytest.CaptureFixture[str]
):
    """Read from the file descriptors: the doctor writes its lines to the terminal's."""
    machine["probes"] = dataclasses.replace(HEALTHY_SPARK, nvcc=None, resident=("pid 7: x",))
    assert main([*command, "--model", str(model)]) == 3
    captured = capfd.readouterr()
    fails = [line for line in (captured.out + captured.err).splitlines() if "FAIL" in line]
    assert [line.split("FAIL ")[1].split(":")[0] for line in fails] == ["nvcc", "no other engine"]
    assert all("; fix: " in line for line in fails)
    assert (
        captured.err.strip()
        .splitlines()[-1]
        .startswith("ling-chat: error: the preflight refused the start (2 of 11 checks failed")
    )
    assert machine["loaded"] == []


def test_skip_preflight_warns_and_starts(
    model: Path, machine: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    machine["probes"] = dataclasses.replace(HEALTHY_SPARK, nvcc=None)
    assert main(["prepare", "--model", str(model), "--skip-preflight"]) == 0
    assert "ling-chat: warning: --skip-preflight" in capsys.readouterr().err
    assert machine["loaded"] == [("prepare", "stack")]


def test_a_dummy_load_reads_no_weights_so_the_preflight_checks_no_checkpoint(
    model: Path,
    machine: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    """The GPU agenda's `prepare` of a folder of config alone was refused for its missing
    weights; with `load_format=dummy` (what the folder is for) no weights are read."""
    from app.backend.checkpoint.verify import check_checkpoint
    from app.backend.firststart import probes as preflight_probes

    checked: list[Path | None] = []

    def probe(download_dir: Path, packages: Any = (), checkpoint: Path | None = None) -> Any:
        checked.append(checkpoint)
        report = check_checkpoint(checkpoint) if checkpoint is not None else None
        return dataclasses.replace(HEALTHY_SPARK, checkpoint=report)

    monkeypatch.setattr(preflight_probes, "probe", probe)
    assert main(["prepare", "--model", str(model)]) == 3
    assert "FAIL checkpoint" in capsys.readouterr().err
    dummy = ["--sglang-arg", "load_format=dummy"]
    assert main(["prepare", "--model", str(model), *dummy]) == 0
    assert checked == [model, None]
    assert machine["loaded"] == [("prepare", "stack")]


def test_serve_and_bench_prepare_each_engine_before_they_load(
    model: Path, machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    with pytest.raises(SystemExit):
        main(["serve", "--model", str(model)])
    assert machine["loaded"] == [("prepare", "stack"), ("engine",)]
    machine["loaded"].clear()
    monkeypatch.setattr("app.commands.bench.run_bench", machine_loaded(machine))
    with pytest.raises(SystemExit):
        main(["bench", "--model", str(model), "--profiles", "baseline,stack"])
    assert machine["loaded"] == [("prepare", "baseline"), ("prepare", "stack"), ("engine",)]


def machine_loaded(machine: dict[str, Any]) -> Any:
    def loaded(*args: Any, **kwargs: Any) -> Any:
        machine["loaded"].append(("engine",))
        raise SystemExit(0)

    return loaded


def test_the_chat_prepares_inside_its_start(model: Path, machine: dict[str, Any]):
    with pytest.raises(SystemExit):
        main(["--model", str(model)])
    assert machine["loaded"] == [("engine",)]  # PreparedBackend: the start-up screen shows it


def doctor_in_the_double(model: Path, *first: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """`ling-chat doctor --model MODEL` in a process whose SGLang is the engine double
    (`first`: folders ahead of it on the path; `env`: more variables)."""
    paths = [*map(str, first), str(DOUBLE), str(ROOT)]
    return subprocess.run(
        [sys.executable, "-m", "app", "doctor", "--model", str(model)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(paths), **env},
        timeout=scaled(120),
    )


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine may pass")
def test_doctor_on_a_machine_without_a_gpu_prints_the_preflight_and_exits_3(
    end_to_end: None, model: Path
):
    done = doctor_in_the_double(model)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("preflight: ")]
    assert len(lines) == 11
    assert lines[0].startswith("preflight: FAIL lever package humming-kernels: `import humming`")
    assert "preflight: FAIL GPU memory: no CUDA GPU found" in lines[5]
    assert (
        lines[6] == "preflight: ok   levers on this GPU: no GPU to judge (see the GPU memory line)"
    )
    assert lines[10] == (
        f"preflight: FAIL checkpoint: {model}: neither model.safetensors.index.json nor "
        "model.safetensors is there: no weights; fix: download the checkpoint again, or redo "
        "the conversion that wrote it"
    )
    assert "Importing SGLang" not in done.stdout


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="a GPU machine may pass")
def test_what_a_lever_package_prints_on_import_goes_to_the_log_not_the_doctors_output(
    end_to_end: None, model: Path, tmp_path: Path
):
    """The preflight imports the lever packages, and torch with them: torch's import-time
    warnings went to the terminal between the doctor's lines."""
    noisy = tmp_path / "packages" / "humming"
    noisy.mkdir(parents=True)
    (noisy / "__init__.py").write_text(
        "import sys, warnings\n"
        "warnings.warn('a torch-like warning on import', UserWarning)\n"
        "print('and a line on stderr', file=sys.stderr)\n"
    )
    (noisy.parent / "sitecustomize.py").write_text(  # the double's world, this humming in it
        f"import runpy, sys\nrunpy.run_path({str(DOUBLE / 'sitecustomize.py')!r})\n"
        "sys.modules.pop('humming', None)\n"
    )
    data = tmp_path / "data"
    done = doctor_in_the_double(model, tmp_path / "packages", LING_CHAT_DATA_DIR=str(data))
    assert done.returncode == 3, done.stderr
    assert "preflight: FAIL GPU memory: no CUDA GPU found" in done.stdout
    assert "torch-like" not in done.stdout + done.stderr
    assert "a line on stderr" not in done.stdout + done.stderr
    assert done.stderr.count("\n") == 1  # the refusal's one line
    logged = (data / "logs" / "sglang.log").read_text()
    assert "a torch-like warning on import" in logged and "and a line on stderr" in logged


@pytest.mark.parametrize("command", [["prepare"], ["serve"], ["doctor"], []])
def test_each_start_builds_its_engine_config_once_and_runs_each_check_once(
    command: list[str], model: Path, machine: dict[str, Any], monkeypatch: pytest.MonkeyPatch
):
    """The chat and serve checked twice (once with the GPU, once in the preflight) and the
    doctor built its config twice; `app.launch` does each once."""
    calls: list[str] = []
    check, build = launch.check_engine_can_start, launch.engine_config

    def counted_check(*args: Any, **kwargs: Any) -> None:
        calls.append("check")
        check(*args, **kwargs)

    def counted_build(*args: Any, **kwargs: Any) -> Any:
        calls.append("config")
        return build(*args, **kwargs)

    monkeypatch.setattr(launch, "check_engine_can_start", counted_check)
    monkeypatch.setattr(launch, "engine_config", counted_build)
    with contextlib.suppress(SystemExit):  # the engine "loaded" (the fixture's double)
        main([*command, "--model", str(model)])
    assert calls == ["config", "check"]
    assert machine["loaded"]
