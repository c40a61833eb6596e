"""A short recorded session from the scripted double, and a reply's events collected."""

from __future__ import annotations

from pathlib import Path

from app.backend.protocol import ChatBackend, ReplyEvent
from app.backend.replay import RecordingBackend
from app.core.chat import ChatMessage, Role, Sampling
from tests.support.clock import FakeClock
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

HELLO = (ChatMessage(Role.USER, "hello"),)


async def collect(backend: ChatBackend) -> list[ReplyEvent]:
    return [event async for event in backend.stream_reply(HELLO, Sampling())]


async def record(
    path: Path, step_s: float = 0.02, clock: FakeClock | None = None
) -> tuple[ScriptedBackendDouble, RecordingBackend]:
    """Record a session of two replies from the scripted double, on `clock` (a fake one)."""
    clock = clock or FakeClock()
    inner = ScriptedBackendDouble(clock=clock)
    inner.enqueue(
        answer_reply("Hi", " there", reasoning=["greeting"], step_s=step_s),
        answer_reply("Bye", step_s=step_s, usage={"verify_rounds": 1}),
    )
    recorder = RecordingBackend(inner, path, clock=clock)
    assert [stage async for stage in recorder.start()] == list(inner.stages)
    await recorder.proof()
    return inner, recorder
