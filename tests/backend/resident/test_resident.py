"""The resident engine (`keep_engine`) with real processes, files and HTTP: the chat's own
start, discovery and attach code against the resident double (a real subprocess that runs
ling-chat's `serve` argument parsing and `Keeper`, with an SGLang API double in place of
SGLang: tests/fixtures/engine_double/resident_double.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app import launch
from app.backend.protocol import ChatBackend, ReplyDone, TextChunk
from app.backend.remote.resident import ResidentBackend
from app.backend.resident import discover as discovery
from app.backend.resident import process
from app.backend.resident.discover import Outcome, discover
from app.backend.resident.state import engine_settings, read_state, runtime_dir
from app.core.chat import ChatMessage, Role, Sampling
from app.core.errors import ConfigError, EngineCrashed
from tests.support import resident
from tests.support.resident import plan_for, wait_until
from tests.support.timeouts import scaled

world = resident.world
HELLO = (ChatMessage(Role.USER, "hello"),)


async def start(backend: ChatBackend) -> list[str]:
    return [f"{stage.name}{' done' if stage.done else ''}" async for stage in backend.start()]


async def reply(backend: ChatBackend) -> tuple[str, ReplyDone]:
    text, last = "", None
    async for event in backend.stream_reply(HELLO, Sampling()):
        if isinstance(event, TextChunk):
            text += event.answer
        last = event
    assert isinstance(last, ReplyDone), last
    return text, last


def chat_once(plan: launch.LaunchPlan) -> tuple[ResidentBackend, list[str], str]:
    """One chat: find or start the engine, attach, one reply, quit."""

    async def run() -> tuple[ResidentBackend, list[str], str]:
        backend = launch.resident_backend(plan)
        assert isinstance(backend, ResidentBackend)
        try:
            stages = await start(backend)
            text, done = await reply(backend)
            assert done.usage is not None and done.usage.verify_rounds == 10
        finally:
            await backend.shutdown()
        return backend, stages, text

    return asyncio.run(run())


def test_the_first_chat_starts_the_engine_detached_and_the_next_attaches_to_it(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_for(world)
    first, stages, text = chat_once(plan)
    assert not first.attached and "resident engine done" in stages and "proof done" in stages
    assert text.startswith("t0 t1")
    assert first.info.kind == "resident"
    assert "started the resident engine" in capsys.readouterr().err
    state = read_state(world / "run")
    assert state is not None and state.ready and state.pid == first.pid
    assert process.alive(first.pid), "the engine outlives the chat"
    assert os.getsid(first.pid) == first.pid, "in a session of its own, no controlling terminal"

    second, stages, _ = chat_once(plan)
    assert second.attached and second.pid == first.pid
    assert "resident engine done" not in stages and "warm-up done" in stages
    assert capsys.readouterr().err == ""


def test_an_engine_with_other_settings_is_never_reused(world: Path) -> None:
    first, _, _ = chat_once(plan_for(world))
    with pytest.raises(ConfigError) as refused:
        launch.resident_backend(plan_for(world, mem_fraction=0.5))
    assert str(refused.value) == (
        f"a resident engine (pid {first.pid}) runs other settings (mem_fraction: 0.65 -> 0.5): "
        "it is not reused; `ling-chat engine stop` stops it"
    )
    assert process.alive(first.pid)


def test_a_stale_state_file_is_removed_with_one_line_and_a_new_engine_starts(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    folder = runtime_dir()
    plan = plan_for(world)
    stale = {
        "pid": gone.pid, "url": "http://127.0.0.1:9", "key_file": str(folder / "engine.key"),
        "model_path": "m", "profile": "stack", "settings_hash": "x", "settings": {},
        "idle_s": 60.0, "log_file": "", "version": "0", "started_at": 0.0, "ready": True,
    }  # fmt: skip
    (folder / "engine.json").write_text(json.dumps(stale))

    backend, _, _ = chat_once(plan)

    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"ling-chat: the resident engine (pid {gone.pid}) is gone; starting a new one"
    assert backend.pid != gone.pid and process.alive(backend.pid)


def test_a_hung_engine_is_stopped_with_one_line_and_replaced(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = plan_for(world)
    monkeypatch.setenv("RESIDENT_DOUBLE_HANG", "1")  # accepts connections, never answers
    hung = launch.start_resident(plan)
    assert wait_until(lambda: (s := read_state(world / "run")) is not None and s.ready)
    monkeypatch.delenv("RESIDENT_DOUBLE_HANG")
    monkeypatch.setattr(discovery, "ANSWER_S", 1.0)

    backend, _, _ = chat_once(plan)

    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"ling-chat: the resident engine (pid {hung}) does not answer (nothing within 1 s): "
        "stopping it and starting a new one"
    )
    assert not process.alive(hung) and backend.pid != hung and process.alive(backend.pid)


def test_the_idle_timer_stops_the_engine_and_removes_its_state_and_key(world: Path) -> None:
    backend, _, _ = chat_once(plan_for(world, keep="1s"))
    assert wait_until(lambda: not process.alive(backend.pid), timeout=15)
    assert sorted(p.name for p in (world / "run").iterdir()) == ["engine.lock"]


def test_the_idle_timer_never_stops_the_engine_mid_reply(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESIDENT_DOUBLE_STEP_S", "0.4")  # 12 tokens: a reply of about 5 s
    backend, _, _ = chat_once(plan_for(world, keep="1s"))
    state = read_state(world / "run")
    assert state is not None
    body = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 512,
            "rid": "long", "stream": True}  # fmt: skip
    headers = {"Authorization": f"Bearer {state.key()}"}
    # No chat window holds the engine: only the reply in flight keeps it busy.
    with httpx.stream("POST", f"{state.url}/v1/chat/completions", json=body, headers=headers,
                      timeout=30) as answer:  # fmt: skip
        lines = [line for line in answer.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and len(lines) == 12 + 3
    assert process.alive(backend.pid), "idle 1 s, yet a 5 s reply ran to its end"
    assert wait_until(lambda: not process.alive(backend.pid), timeout=15)


def test_an_open_chat_window_keeps_the_engine_and_a_second_window_is_told_why(
    world: Path,
) -> None:
    async def run() -> None:
        plan = plan_for(world, keep="1s")
        window = launch.resident_backend(plan)
        assert isinstance(window, ResidentBackend)
        await start(window)
        with pytest.raises(ConfigError) as refused:
            launch.resident_backend(plan)
        assert str(refused.value) == (
            f"the resident engine is in use by another ling-chat window (pid {os.getpid()}): "
            "one window at a time; quit that one, or chat there"
        )
        await asyncio.sleep(scaled(3))
        assert process.alive(window.pid), "idle 1 s, but a window is attached"
        await window.shutdown()
        assert wait_until(lambda: not process.alive(window.pid), timeout=15)

    asyncio.run(run())


def test_a_reply_in_flight_when_the_chat_quits_is_stopped_on_the_engine(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESIDENT_DOUBLE_STEP_S", "1.0")

    async def run() -> tuple[ReplyDone, int]:
        backend = launch.resident_backend(plan_for(world, keep="1s"))
        assert isinstance(backend, ResidentBackend)
        await start(backend)
        events = []
        async for event in backend.stream_reply(HELLO, Sampling()):
            events.append(event)
            if len(events) == 2:
                await backend.shutdown()  # the app quits
        assert isinstance(events[-1], ReplyDone)
        return events[-1], backend.pid

    done, pid = asyncio.run(run())
    assert done.finish_reason == "abort"
    # Aborted on the engine too: idle (1 s) and stopped long before the 12 s reply's end.
    assert wait_until(lambda: not process.alive(pid), timeout=6)


def test_an_engine_that_dies_while_loading_is_one_line_naming_its_log(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESIDENT_DOUBLE_DIE", "CUDA out of memory. Tried to allocate 2.00 GiB")
    monkeypatch.setenv("RESIDENT_DOUBLE_LOAD_S", "0.5")
    plan = plan_for(world)
    backend = launch.resident_backend(plan)
    with pytest.raises(EngineCrashed) as crashed:
        asyncio.run(start(backend))
    log = world / "data" / "logs" / "resident.log"
    assert str(crashed.value) == (
        f"the resident engine (pid {backend.pid}) stopped while loading: CUDA out of memory. "
        f"Tried to allocate 2.00 GiB (its log: {log})"
    )
    asyncio.run(backend.shutdown())


def test_discovery_without_a_state_file_finds_none(world: Path) -> None:
    assert discover(runtime_dir(), engine_settings(plan_for(world).config)).outcome is Outcome.NONE


def test_a_loading_engine_is_waited_for_by_the_next_window(
    world: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RESIDENT_DOUBLE_LOAD_S", "1.5")
    plan = plan_for(world)
    pid = launch.start_resident(plan)
    assert wait_until(lambda: read_state(world / "run") is not None)
    found = discover(runtime_dir(), engine_settings(plan.config))
    assert found.outcome is Outcome.LOADING
    backend, stages, _ = chat_once(plan)
    assert backend.pid == pid and "resident engine done" in stages


def test_sigterm_stops_it_as_the_idle_timer_does(world: Path) -> None:
    backend, _, _ = chat_once(plan_for(world))
    os.kill(backend.pid, signal.SIGTERM)
    assert wait_until(lambda: not process.alive(backend.pid))
    assert read_state(world / "run") is None
