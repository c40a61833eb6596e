"""The resident engine's idle timer and request counter (`Keeper`, `InFlight`), on real
files and locks, a clock given by the test, and ASGI calls as uvicorn makes them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from app.backend.resident.keeper import InFlight, Keeper
from app.backend.resident.lock import AttachLock
from app.backend.resident.state import ResidentState, read_state


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def keeper(folder: Path, clock: Clock, idle_s: float = 60.0) -> Keeper:
    state = ResidentState(
        pid=4242, url="http://127.0.0.1:1", key_file=str(folder / "engine.key"),
        model_path="m", profile="stack", settings_hash="h", settings={}, idle_s=idle_s,
        log_file="", version="0", started_at=clock.now,
    )  # fmt: skip
    kept = Keeper(folder, state, lambda: None, poll_s=3600, clock=clock)
    kept.loading()
    return kept


def test_idle_only_after_idle_s_without_requests_or_an_attached_window(tmp_path: Path) -> None:
    clock = Clock()
    kept = keeper(tmp_path, clock)
    kept.ready()
    clock.now += 59
    assert not kept.check()
    kept.begin()  # a reply in flight: never idle, however long it takes
    clock.now += 600
    assert not kept.check()
    assert read_state(tmp_path).active  # type: ignore[union-attr]
    kept.end()
    ended = clock.now
    clock.now += 1
    assert not kept.check()  # idle counts from the reply's end
    state = read_state(tmp_path)
    assert state is not None and not state.active and state.active_at == ended
    lock = AttachLock(tmp_path)
    assert lock.acquire()  # a chat window attached: not idle either
    clock.now += 600
    assert not kept.check()
    lock.release()  # seen attached at the last tick: idle counts from there
    clock.now += 59
    assert not kept.check()
    clock.now += 600
    assert kept.check()
    kept.begin()
    clock.now += 1
    kept.end()  # a request between two ticks counts as well
    assert not kept.check()
    kept.close()
    assert read_state(tmp_path) is None


def test_the_idle_timer_calls_for_the_stop_once(tmp_path: Path) -> None:
    clock = Clock()
    stops: list[float] = []
    state = keeper(tmp_path, clock, idle_s=0.0).state
    kept = Keeper(tmp_path, state, lambda: stops.append(clock.now), poll_s=0.01, clock=clock)
    kept.ready()
    kept._thread.join(timeout=5)  # noqa: SLF001 - the timer ends once it called for the stop
    assert stops == [clock.now]


def test_in_flight_counts_a_streamed_reply_until_its_last_byte_and_not_the_probes(
    tmp_path: Path,
) -> None:
    kept = keeper(tmp_path, Clock())
    seen: list[bool] = []

    async def streaming_app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(3):
            seen.append(kept.busy())
            await send({"type": "http.response.body", "body": b"x", "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Any) -> None:
        await asyncio.sleep(0)

    middleware = InFlight(streaming_app, keeper=kept)
    asyncio.run(middleware({"type": "http", "path": "/v1/chat/completions"}, receive, send))
    assert seen == [True, True, True] and not kept.busy()
    asyncio.run(middleware({"type": "http", "path": "/model_info"}, receive, send))
    assert seen[3:] == [False, False, False]
