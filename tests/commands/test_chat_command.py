"""`ling-chat` (the chat command): flags, which backend they pick, and the exit status."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from app.backend.remote.remote import RemoteBackend
from app.backend.remote.resident import ResidentBackend
from app.backend.replay import RecordingBackend, ReplayBackend
from app.backend.resident.lock import AttachLock
from app.backend.resident.state import ResidentState, write_state
from app.commands import chat
from app.commands.common import settings_from
from app.core.errors import ConfigError
from app.plumbing.logfile import log_file
from app.storage import ChatStore
from app.ui import LingChatApp
from tests.support.replay import collect, record
from tests.support.scripted_backend import ScriptedBackendDouble


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


@pytest.mark.parametrize(("ready", "hold_s"), [(True, 0.0), (False, chat.PROOF_HOLD_S)])
def test_a_recorded_chat_on_a_loaded_resident_engine_still_skips_the_proof_pause(
    tmp_path: Path, ready: bool, hold_s: float
) -> None:
    """--record wraps the backend; the resident backend's `attached` still decides."""
    state = ResidentState(
        pid=os.getpid(), url="http://127.0.0.1:1", key_file="", model_path="m", profile="stack",
        settings_hash="", settings={}, idle_s=60.0, log_file="", version="", started_at=0.0,
        ready=ready,
    )  # fmt: skip
    write_state(tmp_path, state)
    resident = ResidentBackend(
        tmp_path, os.getpid(), AttachLock(tmp_path), log_file=tmp_path / "log", profile="stack",
        min_accept_length=2.0, server_wait=5.0,
    )  # fmt: skip
    assert resident.attached is ready
    assert chat._proof_hold_s(resident) == hold_s
    assert chat._proof_hold_s(RecordingBackend(resident, tmp_path / "t.json")) == hold_s


def test_server_flag_builds_a_remote_backend() -> None:
    args = parse("--server", "http://gpu:30000", "--api-key", "k", "--allow-unoptimized")
    backend = chat._backend(args, settings_from(args))
    assert isinstance(backend, RemoteBackend)
    assert backend.base_url == "http://gpu:30000" and backend.allow_unoptimized


@pytest.mark.parametrize(
    ("argv", "env", "wait_s"),
    [
        ((), {}, 120.0),
        (("--server-wait", "5"), {}, 5.0),
        ((), {"LING_CHAT_SERVER_WAIT": "7.5"}, 7.5),
    ],
)
def test_the_server_wait_comes_from_the_flag_or_the_settings(
    monkeypatch: pytest.MonkeyPatch, argv: tuple[str, ...], env: dict[str, str], wait_s: float
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    args = parse("--server", "http://gpu:30000", *argv)
    backend = chat._backend(args, settings_from(args))
    assert isinstance(backend, RemoteBackend)
    assert backend.server_wait == wait_s


@pytest.mark.parametrize("wait", ["0", "nan", "-1", "99999"])
def test_a_server_wait_out_of_range_is_one_line(wait: str) -> None:
    with pytest.raises(ConfigError) as refused:
        settings_from(parse("--server", "http://gpu:30000", "--server-wait", wait))
    assert "server" in str(refused.value) and "\n" not in str(refused.value)


def test_replay_and_server_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse("--replay", "t.json", "--server", "http://gpu:30000")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--allow-unoptimized",), "only applies to --server"),
        (("--replay", "t.json", "--replay-speed", "0"), "must be a positive number, got 0.0"),
        (("--replay", "t.json", "--replay-speed", "nan"), "must be a positive number, got nan"),
        (("--replay", "t.json", "--replay-speed", "inf"), "must be a positive number, got inf"),
        (("--replay", "t.json", "--replay-speed", "-2"), "must be a positive number, got -2.0"),
    ],
)
def test_bad_flag_combinations_are_config_errors(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        chat.run(parse(*argv))


@pytest.mark.usefixtures("keys_from_a_terminal")
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


@pytest.mark.parametrize(
    ("keymap", "message"),
    [
        (
            'send = "notakey+zz"',
            "keymap.send = 'notakey+zz' is invalid: unknown key 'notakey+zz' (keys look like",
        ),
        ('send = "ctrl+s,"', "keymap.send = 'ctrl+s,' is invalid: an empty key"),
        ('send = ""', "keymap.send = '' is invalid: an empty key"),
        ('stop_reply = "hyperdrive+x"', "unknown key 'hyperdrive+x'"),
        (
            'send = "ctrl+q"',
            "keymap.send = 'ctrl+q' is invalid: ctrl+q would be both quit and send",
        ),
        ('quit = "f5"', "keymap.quit = 'f5' is invalid: f5 would be both quit and copy_reply"),
        (
            'stop_replyy = "ctrl+x"',
            "keymap.stop_replyy = 'ctrl+x' is invalid: no action has this id (the ids: help, ",
        ),
        (
            'new_chat = "ctrl+s"',
            "keymap.new_chat = 'ctrl+s' is invalid: ctrl+s would be both send and new_chat",
        ),
        (
            'help = "f9,f1"',
            "keymap.help = 'f9,f1' is invalid: f9 would be both help and toggle_speed",
        ),
    ],
)
def test_a_keymap_entry_that_cannot_work_is_one_line_before_the_app_opens(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], keymap: str, message: str
) -> None:
    from app.cli import main

    config = Path(os.environ["LING_CHAT_CONFIG"])
    config.write_text(f"[keymap]\n{keymap}\n")
    monkeypatch.setattr(LingChatApp, "run_async", _never_run)
    assert main(["--replay", "demo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"ling-chat: error: {config}: ") and err.count("\n") == 1
    assert message in err


@pytest.mark.usefixtures("keys_from_a_terminal")
def test_keys_textual_knows_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    Path(os.environ["LING_CHAT_CONFIG"]).write_text(
        '[keymap]\nsend = "ctrl+enter,f10"\nsearch = "ctrl+slash"\n'
        'copy_code = "shift+up,question_mark"\n'
    )

    async def quit_run(app: LingChatApp) -> None:
        app.exit(return_code=0)

    monkeypatch.setattr(LingChatApp, "run_async", quit_run)
    assert chat.run(parse("--replay", "demo")) == 0


async def _never_run(app: LingChatApp) -> None:
    raise AssertionError("the app opened")


@pytest.mark.usefixtures("keys_from_a_terminal")
def test_a_replay_keeps_its_replies_out_of_the_users_history(
    end_to_end: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shipped demo, played at speed through the real app, leaves the history as it was."""
    from app.ui.screens.chat import ChatScreen
    from tests.support.pilot import chat_screen, reply_done, send

    used: list[Path] = []

    async def headless_run(app: LingChatApp) -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):  # any key ends the proof screen's pause
                if isinstance(app.screen, ChatScreen):
                    break
                await pilot.press("space")
                await pilot.pause(0.1)
            await chat_screen(pilot)
            await send(pilot, "What is 17 * 23?")
            await reply_done(pilot)
            used.append(app.store.path)
            assert app.store.measured_replies()  # the replay did store its reply, there
            await pilot.press("ctrl+q")

    monkeypatch.setattr(LingChatApp, "run_async", headless_run)
    args = parse("--replay", "demo", "--replay-speed", "1000")
    assert chat.run(args) == 0

    history = settings_from(args).db_path
    assert used and used[0] != history and not used[0].exists()
    assert not history.exists()


def test_two_actions_may_swap_their_keys() -> None:
    from app.ui.bindings import check_keymap

    check_keymap({"copy_reply": "ctrl+s", "send": "f5"}, "config.toml")
