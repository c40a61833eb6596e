"""`ling-chat serve` judges itself: only a proof that ran and passed keeps it serving."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.backend.remote.server import judge
from app.backend.resident.state import read_state
from app.core.errors import BackendError
from app.core.proof_report import ProofLine, ProofReport, Verdict
from tests.support.timeouts import scaled


def report(verdict: Verdict) -> ProofReport:
    return ProofReport("stack", (ProofLine("humming", "Humming", verdict, "6/6", "fix"),))


@pytest.mark.parametrize(("verdict", "ok"), [(Verdict.PASS, True), (Verdict.FAIL, False)])
def test_the_verdict_is_the_reports_shown_on_the_terminal_only(
    verdict: Verdict, ok: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = io.StringIO()
    assert judge(lambda: report(verdict), lambda r: f"shown: {r.summary()}", terminal) is ok
    assert terminal.getvalue() == f"shown: {report(verdict).summary()}\n"
    assert capsys.readouterr().out == ""  # the process's stdout (SGLang's log) is untouched


def test_a_proof_that_cannot_run_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> ProofReport:
        raise BackendError("warm-up failed: HTTP 500")

    terminal = io.StringIO()
    assert judge(broken, lambda r: "never shown", terminal) is False
    assert terminal.getvalue() == (
        "ling-chat: refused to serve: the proof could not run (warm-up failed: HTTP 500)\n"
    )
    assert capsys.readouterr().out == ""


# --- `ling-chat serve` in a fresh process, SGLang as the engine double --------------------

ROOT = Path(__file__).resolve().parents[3]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
KEY = "sk-ling-chat-test-4f1c9a07"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def ling_chat_serve(
    tmp_path: Path, *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    return subprocess.run(
        [
            sys.executable,
            str(DOUBLE / "cli_session.py"),
            "serve",
            "--model",
            str(model),
            "--data-dir",
            str(tmp_path / "data"),
            "--port",
            str(free_port()),
            *argv,
        ],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)]),
            **(env or {}),
        },
        timeout=scaled(120),
    )


@pytest.mark.parametrize("given", ["env", "file", "flag"])
def test_serve_keeps_the_api_key_out_of_every_log_and_sglang_off_the_terminal(
    end_to_end: None, tmp_path: Path, given: str
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    key_file.chmod(0o600)
    argv, env = {
        "env": ((), {"LING_CHAT_API_KEY": KEY}),
        "file": (("--api-key-file", str(key_file)), {}),
        "flag": (("--api-key", KEY), {}),
    }[given]

    done = ling_chat_serve(tmp_path, *argv, env=env)

    assert done.returncode == 2  # the double serves no HTTP: the self-proof cannot connect
    assert "refused to serve: the proof could not run (cannot connect" in done.stdout
    log = (tmp_path / "data" / "logs" / "sglang.log").read_text()
    assert "server_args=ServerArgs(" in log and "api_key='***'" in log
    assert "a failure that quotes the key: ***" in log
    for noise in ("server_args", "Uvicorn running", "Started server", "a warning SGLang"):
        assert noise in log
        assert noise not in done.stdout + done.stderr
    assert KEY not in done.stdout + done.stderr
    for path in (tmp_path / "data").rglob("*"):
        assert path.is_dir() or KEY not in path.read_text(), path
    warned = "--api-key shows in `ps` to every user of this machine" in done.stderr
    assert warned is (given == "flag")


def test_a_key_file_others_can_read_is_refused_in_one_line(
    end_to_end: None, tmp_path: Path
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    key_file.chmod(0o644)

    done = ling_chat_serve(tmp_path, "--api-key-file", str(key_file))

    assert done.returncode == 1
    assert done.stderr == (
        f"ling-chat: error: --api-key-file {key_file}: readable by others (mode 0644); "
        f"chmod 600 {key_file}\n"
    )
    assert not (tmp_path / "data" / "logs" / "sglang.log").exists()


def test_the_self_proof_reaches_the_server_where_it_listens_ipv6_included():
    from app.backend.remote.server import local_url

    assert local_url("0.0.0.0", 30000) == "http://127.0.0.1:30000"
    assert local_url("::1", 30000) == "http://[::1]:30000"
    assert local_url("localhost", 8) == "http://localhost:8"


def test_a_resident_serve_says_it_is_loading_and_leaves_nothing_once_stopped(
    end_to_end: None,
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    key = run / "engine.key"
    key.write_text(KEY)
    key.chmod(0o600)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    argv = ["serve", "--model", str(model), "--data-dir", str(tmp_path / "data")]
    argv += ["--port", str(free_port()), "--api-key-file", str(key), "--resident", "30m"]
    server = subprocess.Popen(
        [sys.executable, str(DOUBLE / "cli_session.py"), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)]),
            "LING_CHAT_RUNTIME_DIR": str(run),
        },
    )
    seen = None
    while server.poll() is None and seen is None:
        seen = read_state(run)
        time.sleep(0.01)
    out, err = server.communicate(timeout=scaled(120))
    assert seen is not None and seen.pid == server.pid and not seen.ready, err
    assert seen.url.startswith("http://127.0.0.1:") and seen.settings["profile"] == "stack"
    assert server.returncode == 2  # the double serves no HTTP: the self-proof cannot connect
    assert sorted(p.name for p in run.iterdir()) == [], "state and key go with the engine"
    log = (tmp_path / "data" / "logs" / "sglang.log").read_text()
    assert "middleware added: ['InFlight']" in log  # the idle timer counts SGLang's requests
