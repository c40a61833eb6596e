"""The resident engine's test world: a runtime folder, a model folder, and the resident
double (tests/fixtures/engine_double/resident_double.py) as the engine `serve` runs."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app import launch
from app.backend.resident import process, spawn
from app.backend.resident.state import read_state
from app.settings import load_settings
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"


def passing_preflight_double(*args: object, **kwargs: object) -> None:
    """The preflight as a machine with a free GPU answers it (it has its own tests)."""


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, end_to_end: None) -> Iterator[Path]:
    """A runtime folder, a model folder and the resident double as the engine `serve` runs;
    every engine started in this process is stopped afterwards, loaded or not, as is the one
    the state file names."""
    monkeypatch.setenv("LING_CHAT_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("LING_CHAT_CONFIG", "/dev/null")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(DOUBLE), str(ROOT)]))
    monkeypatch.setattr(
        spawn, "SERVE_COMMAND", [sys.executable, str(DOUBLE / "resident_double.py")]
    )
    started: list[int] = []
    start_detached = spawn.start_detached

    def recorded(argv: list[str], log_file: Path) -> int:
        started.append(start_detached(argv, log_file))
        return started[-1]

    monkeypatch.setattr(spawn, "start_detached", recorded)
    monkeypatch.setattr(launch, "preflight_gate", passing_preflight_double)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    yield tmp_path
    state = read_state(tmp_path / "run")
    for pid in {*started, *([state.pid] if state is not None else [])}:
        if process.alive(pid):
            process.stop(pid, grace_s=5)


def plan_for(world: Path, keep: str = "60s", **settings: object) -> launch.LaunchPlan:
    chosen = load_settings(
        model_path=str(world / "model"), data_dir=str(world / "data"), keep_engine=keep, **settings
    )
    return launch.launch_plan(chosen)


def wait_until(condition: Callable[[], object], timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + scaled(timeout)
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False
