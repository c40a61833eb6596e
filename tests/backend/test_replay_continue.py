"""A recorded session continues a reply only where it recorded one (app/backend/replay.py):
a recorded continuation plays as it was, with its recorded figures and cut; asking for one
where the recording has none is refused in one line, and that reply stays next."""

from __future__ import annotations

import json
from pathlib import Path

from app.backend.protocol import ReplyDone, ReplyError, TextChunk
from app.backend.replay import NO_CONTINUATION, RecordingBackend, ReplayBackend
from app.core.chat import PartialReply, Sampling, Thinking
from tests.support.clock import FakeClock
from tests.support.replay import HELLO
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

CUT = "the reply budget of 2 tokens"
PARTIAL = PartialReply("", "Part one")


async def recorded(path: Path, clock: FakeClock) -> ScriptedBackendDouble:
    """A session of a reply cut by its budget, then its continuation."""
    inner = ScriptedBackendDouble(clock=clock)
    inner.enqueue(
        answer_reply("Part", " one", finish_reason="length", cut_by=CUT),
        answer_reply(" and two.", usage={"verify_rounds": 1}),
    )
    recorder = RecordingBackend(inner, path, clock=clock)
    _ = [stage async for stage in recorder.start()]
    await recorder.proof()
    thinking = Thinking(budget=64)
    _ = [e async for e in recorder.stream_reply(HELLO, Sampling(), thinking=thinking)]
    _ = [e async for e in recorder.stream_reply(HELLO, Sampling(), partial=PARTIAL)]
    return inner


async def test_a_recorded_continuation_is_recorded_with_what_it_continued(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    inner = await recorded(path, FakeClock())
    assert inner.partials == [None, PARTIAL]
    first, second = json.loads(path.read_text())["replies"]
    assert first["request"]["thinking"] == {"enabled": True, "budget": 64}
    assert "partial" not in first["request"]
    assert first["events"][-1]["cut_by"] == CUT
    assert second["request"]["partial"] == {"reasoning": "", "answer": "Part one"}


async def test_a_replay_plays_a_recorded_continuation_with_its_figures(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    await recorded(path, clock)
    replay = ReplayBackend(path, clock=clock, sleep=clock.sleep)
    cut = [e async for e in replay.stream_reply(HELLO, Sampling())]
    assert isinstance(cut[-1], ReplyDone)
    assert (cut[-1].finish_reason, cut[-1].cut_by) == ("length", CUT)
    more = [e async for e in replay.stream_reply(HELLO, Sampling(), partial=PARTIAL)]
    assert "".join(e.answer for e in more if isinstance(e, TextChunk)) == " and two."
    assert isinstance(more[-1], ReplyDone) and more[-1].usage.verify_rounds == 1


async def test_a_replay_refuses_a_continuation_it_did_not_record(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    await recorded(path, clock)
    replay = ReplayBackend(path, clock=clock, sleep=clock.sleep)
    (refused,) = [e async for e in replay.stream_reply(HELLO, Sampling(), partial=PARTIAL)]
    assert isinstance(refused, ReplyError) and refused.message == NO_CONTINUATION
    assert "\n" not in refused.message
    first = [e async for e in replay.stream_reply(HELLO, Sampling())]  # still next
    assert isinstance(first[-1], ReplyDone) and first[-1].finish_reason == "length"


async def test_an_older_trace_without_requests_thinking_still_plays(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    await recorded(path, clock)
    trace = json.loads(path.read_text())
    for reply in trace["replies"]:
        reply["request"].pop("thinking")
        reply["events"][-1].pop("cut_by", None)
    path.write_text(json.dumps(trace))
    replay = ReplayBackend(path, clock=clock, sleep=clock.sleep)
    events = [e async for e in replay.stream_reply(HELLO, Sampling())]
    assert isinstance(events[-1], ReplyDone) and events[-1].cut_by == ""
