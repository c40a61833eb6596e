"""`ling-chat` (the chat command): flags, which backend they pick, and the exit status."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.backend.remote import RemoteBackend
from app.backend.replay import RecordingBackend, ReplayBackend
from app.commands import chat
from app.commands.common import settings_from
from app.errors import ConfigError
from app.logfile import log_file
from app.storage import ChatStore
from app.ui import LingChatApp
from tests.ui.scripted_backend import ScriptedBackendDouble
from tests.ui.test_replay import collect, record


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    chat.add_arguments(parser)
    return parser.parse_args(argv)


async def test_replay_flag_plays_the_trace_and_record_wraps_any_backend(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    _, recorder = await record(trace)
    await collect(recorder)
    args = parse(
        "--replay", str(trace), "--replay-speed", "4", "--record", str(tmp_path / "o.json")
    )
    backend = chat._backend(args, settings_from(args))
    assert isinstance(backend, RecordingBackend)
    assert backend.info.kind == "replay"
    replay = chat._backend(parse("--replay", str(trace)), settings_from(args))
    assert isinstance(replay, ReplayBackend)


def test_server_flag_builds_a_remote_backend() -> None:
    args = parse("--server", "http://gpu:30000", "--api-key", "k", "--allow-unoptimized")
    backend = chat._backend(args, settings_from(args))
    assert isinstance(backend, RemoteBackend)
    assert backend.base_url == "http://gpu:30000" and backend.allow_unoptimized


def test_replay_and_server_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse("--replay", "t.json", "--server", "http://gpu:30000")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--allow-unoptimized",), "only applies to --server"),
        (("--replay", "t.json", "--replay-speed", "0"), "must be positive"),
    ],
)
def test_bad_flag_combinations_are_config_errors(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        chat.run(parse(*argv))


def test_run_returns_the_app_status_and_always_shuts_the_backend_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    backend = ScriptedBackendDouble()
    monkeypatch.setattr(chat, "_backend", lambda args, settings: backend)

    async def crashed_run(app: LingChatApp) -> None:
        app.exit(return_code=3)
        raise RuntimeError("the app crashed")

    monkeypatch.setattr(LingChatApp, "run_async", crashed_run)
    args = parse()
    with pytest.raises(RuntimeError, match="the app crashed"):
        chat.run(args)
    assert backend.shutdown_calls == 1

    async def quit_run(app: LingChatApp) -> None:
        assert log_file() == settings_from(args).log_dir / "ling-chat.log"
        app.exit(return_code=2)

    monkeypatch.setattr(LingChatApp, "run_async", quit_run)
    assert chat.run(args) == 2
    assert log_file() is None
    with ChatStore.open(settings_from(args).db_path) as store:
        assert store.list_conversations() == []
