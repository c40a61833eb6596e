"""`ling-chat engine status|stop`, `--keep-engine` and `keep_engine`, as a user meets them:
fresh processes of `ling-chat` against a running resident double."""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import launch
from app.backend.remote.resident import ResidentBackend
from app.backend.resident import process
from app.backend.resident.state import RUNTIME_DIR_ENV, read_state
from app.commands import chat
from app.commands.common import settings_from
from app.core.duration import parse_duration
from app.core.errors import ConfigError
from app.settings import load_settings
from tests.support import resident
from tests.support.resident import plan_for

world = resident.world


def ling_chat(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "app", *argv], capture_output=True, text=True, timeout=60
    )


def started(world: Path) -> int:
    backend = launch.resident_backend(plan_for(world, keep="30m"))
    asyncio.run(backend.shutdown())
    assert isinstance(backend, ResidentBackend)
    assert resident.wait_until(lambda: (s := read_state(world / "run")) is not None and s.ready)
    return backend.pid


def test_engine_status_shows_model_profile_memory_idle_address_and_pid(world: Path) -> None:
    pid = started(world)
    done = ling_chat("engine", "status")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"resident engine: pid {pid}, ling-chat 0.1.0"
    assert lines[1] == f"  model     {world / 'model'}"
    assert lines[2] == "  profile   stack"
    assert lines[3].startswith("  memory    ") and "GiB" in lines[3]
    assert lines[4].startswith("  state     idle for ") and "stops after 30m 00s idle" in lines[4]
    assert lines[5].startswith("  listens   http://127.0.0.1:")
    assert f"API key in {world / 'run' / 'engine.key'}, mode 0600" in lines[5]


def test_engine_stop_unloads_it_and_says_so(world: Path) -> None:
    pid = started(world)
    done = ling_chat("engine", "stop")
    assert done.stdout == f"resident engine (pid {pid}) stopped: its memory is free\n"
    assert not process.alive(pid) and read_state(world / "run") is None
    assert ling_chat("engine", "status").stdout == "no resident engine\n"


def test_the_chat_chooses_the_resident_engine_only_with_keep_engine(world: Path) -> None:
    from app.cli import build_parser

    model = str(world / "model")
    kept = build_parser().parse_args(["--keep-engine", "30m", "--model", model])
    backend = chat._backend(kept, settings_from(kept))
    assert isinstance(backend, ResidentBackend)
    asyncio.run(backend.shutdown())
    default = build_parser().parse_args(["--model", model])
    assert settings_from(default).keep_engine_s == 0  # today's behaviour: in-process


@pytest.mark.parametrize(
    ("text", "seconds"), [("0", 0), ("90s", 90), ("30m", 1800), ("2h", 7200), ("15", 900)]
)
def test_keep_engine_reads_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_a_bad_keep_engine_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LING_CHAT_CONFIG", "/dev/null")
    with pytest.raises(ConfigError) as bad:
        load_settings(keep_engine="soon")
    assert "keep_engine" in str(bad.value) and "'soon' is not a duration such as 0, 90s" in str(
        bad.value
    )
    assert "\n" not in str(bad.value)


def test_serve_resident_refuses_an_open_bind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.commands import serve

    args = argparse.Namespace(
        host="0.0.0.0", port=1, tp=1, resident="30m", api_key=None, api_key_file=None
    )
    monkeypatch.delenv("LING_CHAT_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="serving on 0.0.0.0 needs an API key"):
        serve.serve_overrides(args)
    args.host = "127.0.0.1"
    monkeypatch.setenv("LING_CHAT_API_KEY", "k")  # a key, but not from a file of its own
    with pytest.raises(ConfigError, match="--resident needs --host 127.0.0.1 and an --api-key"):
        serve.serve_overrides(args)


def test_engine_status_names_a_hung_engine_and_exits_1(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESIDENT_DOUBLE_HANG", "1")  # accepts connections, never answers
    pid = launch.start_resident(plan_for(world))
    assert resident.wait_until(lambda: (s := read_state(world / "run")) is not None and s.ready)
    done = subprocess.run(
        [sys.executable, "-c", "import sys; from app.backend.resident import discover; "
         "discover.ANSWER_S = 1.0; from app.cli import main; sys.exit(main(sys.argv[1:]))",
         "engine", "status"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "  state     NOT ANSWERING (hung): `ling-chat engine stop` stops it" in done.stdout
    assert process.alive(pid)


def test_without_xdg_runtime_dir_status_says_only_its_line(
    end_to_end: None, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_RUNTIME_DIR", RUNTIME_DIR_ENV)}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "app", "engine", "status"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "no resident engine\n", "")
