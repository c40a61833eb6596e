"""`ling-chat bench` as a real process on the engine double: it exits after its table, and its
JSON names ling-chat's own version and commit, whatever repository it runs in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
ARGS = ["--profiles", "stack", "--input-len", "8", "--output-len", "4", "--num-prompts", "1"]
ARGS += ["--reps", "1", "--warmup", "0", "--allow-unproven"]


def _git(cwd: Path, *argv: str) -> str:
    return subprocess.run(
        ["git", *argv], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def _other_repo(path: Path) -> str:
    """A git repository with one commit, not ling-chat's; its commit."""
    path.mkdir()
    _git(path, "init", "-q")
    (path / "notes.txt").write_text("someone else's project\n")
    _git(path, "add", "notes.txt")
    _git(path, "-c", "user.name=x", "-c", "user.email=x@example.com", "commit", "-qm", "init")
    return _git(path, "rev-parse", "HEAD")


def _bench(
    cwd: Path, app_root: Path, out: Path, *extra: str
) -> tuple[subprocess.CompletedProcess[str], Any]:
    model = cwd / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(app_root), str(ROOT)]),
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        [sys.executable, str(DOUBLE / "bench_session.py"), "--model", str(model), *ARGS]
        + [*extra, "--json", str(out)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(60),  # the engine double's zmq context hangs an hour if left open
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text())


def test_bench_exits_after_its_table_and_names_ling_chats_commit_not_the_cwds(
    end_to_end: None, tmp_path
):
    other = _other_repo(tmp_path / "elsewhere")
    done, result = _bench(tmp_path / "elsewhere", ROOT, tmp_path / "run.json")
    assert "decode tok/s" in done.stdout
    assert "Context.term() waits" not in done.stderr
    assert result["git"]["commit"] == _git(ROOT, "rev-parse", "HEAD") != other
    assert result["git"]["version"] == metadata.version("ling-chat")


def test_an_installed_copy_inside_another_repository_has_no_commit(end_to_end: None, tmp_path):
    """As a wheel installed into a virtual environment inside someone's repository."""
    _other_repo(tmp_path / "project")
    site = tmp_path / "project" / ".venv" / "site-packages"
    shutil.copytree(ROOT / "app", site / "app", ignore=shutil.ignore_patterns("__pycache__"))
    _done, result = _bench(tmp_path / "project", site, tmp_path / "run.json")
    assert result["git"]["commit"] is None and result["git"]["dirty"] is None
    assert result["git"]["version"] == metadata.version("ling-chat")


def test_the_bf16_router_rig_runs_beside_the_stack_proving_its_gates(end_to_end: None, tmp_path):
    _done, result = _bench(
        tmp_path, ROOT, tmp_path / "run.json", "--profiles", "stack,stack+bf16-router"
    )
    lines = {
        p["profile"]: [x for x in p["proof"]["lines"] if x["key"] == "router"]
        for p in result["profiles"]
    }
    assert lines["stack"] == []  # the lever's line is its own profile's
    assert lines["stack+bf16-router"][0]["verdict"] == "pass"
    assert "bfloat16 6" in lines["stack+bf16-router"][0]["evidence"]
    engine = {p["profile"]: p["engine"] for p in result["profiles"]}
    assert "json_model_override_args" not in engine["stack"]
    assert engine["stack+bf16-router"]["json_model_override_args"] == '{"router_dtype": "bf16"}'
