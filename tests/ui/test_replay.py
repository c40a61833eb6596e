"""Recorded sessions: RecordingBackend writes traces, ReplayBackend plays them (also in the UI)."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest
from textual.widgets import Static

from app.backend.protocol import DraftShape, ReplyDone, ReplyEvent, TextChunk
from app.backend.replay import MAX_START_S, RecordingBackend, ReplayBackend, trace_path
from app.backend.trace import read_trace
from app.core.chat import Sampling
from app.core.errors import BackendError
from app.core.reply_usage import ReplyUsage
from app.storage import ChatStore, MessageStatus
from app.ui import LingChatApp
from tests.support.clock import FakeClock
from tests.support.pilot import SIZE, chat_screen, reply_done, send, text_of
from tests.support.replay import HELLO, collect, record
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply


def relative(events: list[ReplyEvent], started: float) -> list[float]:
    return [event.at - started for event in events]


async def test_a_recorded_session_replays_with_its_timing(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    inner, recorder = await record(path, step_s=0.1, clock=clock)
    started = clock()
    recorded = await collect(recorder)
    recorded_times = relative(recorded, started)
    await collect(recorder)
    await recorder.shutdown()
    assert inner.shutdown_calls == 1

    replay = ReplayBackend(path, clock=clock, sleep=clock.sleep)
    assert replay.info.kind == "replay"
    assert replay.info.model == inner.info.model and replay.info.speculative
    assert [stage async for stage in replay.start()] == list(inner.stages)
    assert await replay.proof() == inner.report
    started = clock()
    played = await collect(replay)
    assert [(type(e), getattr(e, "answer", None)) for e in played] == [
        (type(e), getattr(e, "answer", None)) for e in recorded
    ]
    assert [e.completion_tokens for e in played if isinstance(e, TextChunk)] == [3, 6, 9]
    assert relative(played, started) == pytest.approx(recorded_times)
    assert relative(played, started)[-1] == pytest.approx(0.4)
    second = await collect(replay)
    assert isinstance(second[-1], ReplyDone) and second[-1].usage.verify_rounds == 1
    third = await collect(replay)  # the trace starts over
    assert [e.answer for e in third if isinstance(e, TextChunk)] == ["", "Hi", " there"]


async def test_the_trace_is_rewritten_after_each_reply_only(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    _, recorder = await record(path)
    trace = json.loads(path.read_text())
    assert (trace["format"], trace["version"], trace["replies"]) == ("ling-chat-trace", 1, [])
    assert trace["proof"]["profile"] == "stack"
    await collect(recorder)
    stream = cast(AsyncGenerator[ReplyEvent, None], recorder.stream_reply(HELLO, Sampling()))
    await anext(stream)  # the second reply is in flight
    trace = json.loads(path.read_text())
    (reply,) = trace["replies"]
    assert reply["request"]["messages"] == [{"role": "user", "content": "hello"}]
    assert [event["type"] for event in reply["events"]] == ["chunk", "chunk", "chunk", "done"]
    assert reply["events"][-1]["usage"]["completion_tokens"] == 9
    await stream.aclose()


async def test_stop_reply_ends_a_replayed_reply_with_abort(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    _, recorder = await record(path, step_s=0.2, clock=clock)
    await collect(recorder)
    replay = ReplayBackend(path, clock=clock, sleep=clock.sleep)
    events = []
    async for event in replay.stream_reply(HELLO, Sampling()):
        events.append(event)
        if len(events) == 1:
            await replay.stop_reply()
    assert isinstance(events[-1], ReplyDone)
    assert events[-1].finish_reason == "abort"
    assert events[-1].usage.completion_tokens == 3


async def test_speed_factor_plays_faster(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    _, recorder = await record(path, step_s=0.1, clock=clock)
    await collect(recorder)
    started = clock()
    await collect(ReplayBackend(path, speed=10, clock=clock, sleep=clock.sleep))
    assert clock() - started == pytest.approx(0.04)  # recorded: 0.4 s


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such trace file"),
        ("{not json", "not a readable trace"),
        ('{"format": "other"}', "not a ling-chat trace"),
        ('{"format": "ling-chat-trace", "version": 99}', "trace version 99 is not supported"),
        ('{"format": "ling-chat-trace", "version": 1}', "malformed trace"),
    ],
)
def test_unusable_traces_are_one_line_errors(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "trace.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BackendError, match=message):
        ReplayBackend(path)


@pytest.mark.parametrize(
    "damage",
    [
        lambda reply: reply["events"][0].pop("t"),
        lambda reply: reply["events"].pop(),  # no done event: the reply would never end
        lambda reply: reply["events"].clear(),
        lambda reply: reply["events"][0].update(t=float("nan")),
        lambda reply: reply["events"][0].update(t=float("inf")),
        lambda reply: reply["events"][0].update(t=-1.0),
        lambda reply: reply["events"][0].update(completion_tokens=10**30),
        lambda reply: reply["events"][0].update(completion_tokens=1e300),
        lambda reply: reply["events"][-1]["usage"].update(completion_tokens=float("inf")),
        lambda reply: reply["events"][-1]["usage"].update(verify_rounds=-2),
        lambda reply: reply["events"][-1]["usage"].update(accept_histogram=[1] * 5000),
    ],
)
async def test_a_damaged_reply_in_a_trace_is_a_one_line_error(tmp_path: Path, damage) -> None:
    path = tmp_path / "trace.json"
    _, recorder = await record(path)
    await collect(recorder)
    trace = json.loads(path.read_text())
    damage(trace["replies"][0])
    path.write_text(json.dumps(trace))
    with pytest.raises(BackendError, match="malformed trace") as refused:
        ReplayBackend(path)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (
            lambda events: events[-1].update(t=0.0),
            r"reply 1, event \d+: its time 0 s is before the last event's [\d.]+ s",
        ),
        (
            lambda events: events.insert(0, {**events[-1], "t": 0.0}),
            "reply 1, event 1: a reply ends with its one done or error event",
        ),
        (
            lambda events: events.insert(1, {**events[-1], "t": events[0]["t"]}),
            "reply 1, event 2: a reply ends with its one done or error event",
        ),
    ],
    ids=["time backwards", "done first", "done in the middle"],
)
async def test_a_reply_that_would_not_play_as_recorded_refuses_the_trace(
    tmp_path: Path, damage: Callable[[list[dict[str, object]]], None], why: str
) -> None:
    """Before: times going back played at 24,510 tok/s, and a `done` first played an empty
    reply marked complete."""
    path = tmp_path / "trace.json"
    _, recorder = await record(path)
    await collect(recorder)
    trace = json.loads(path.read_text())
    damage(trace["replies"][0]["events"])
    path.write_text(json.dumps(trace))
    with pytest.raises(BackendError, match=f"^{path}: malformed trace .*{why}") as refused:
        ReplayBackend(path)
    assert "\n" not in str(refused.value)


async def test_a_replay_shows_the_recorded_draft_depth(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    inner, _ = await record(path)
    assert ReplayBackend(path).info.draft == inner.info.draft == DraftShape(3, 4)


def test_a_trace_recorded_before_the_draft_was_kept_reads_it_from_its_proof(
    tmp_path: Path,
) -> None:
    """A trace whose info holds no draft (as the first H200 recording): the proof's facts
    name the NEXTN shape."""
    trace = read_trace(trace_path("demo"))
    trace["info"].pop("draft", None)
    path = tmp_path / "old.trace.json"
    path.write_text(json.dumps(trace))
    assert ReplayBackend(path).info.draft == DraftShape(3, 4)


def test_a_trace_without_a_draft_or_a_proof_shows_none(tmp_path: Path) -> None:
    trace = read_trace(trace_path("demo"))
    trace["proof"] = None
    trace["info"].pop("draft", None)
    path = tmp_path / "old.trace.json"
    path.write_text(json.dumps(trace))
    assert ReplayBackend(path).info.draft is None


@pytest.mark.parametrize(
    "draft",
    [
        [3, 4],
        "3 steps",
        {"depth": 3},
        {"steps": 3, "verify_tokens": "4", "block": None},
        {"steps": 1, "verify_tokens": 9, "block": -8},
    ],
)
async def test_a_damaged_draft_is_a_malformed_trace(tmp_path: Path, draft: object) -> None:
    path = tmp_path / "trace.json"
    await record(path)
    trace = json.loads(path.read_text())
    trace["info"]["draft"] = draft
    path.write_text(json.dumps(trace))
    with pytest.raises(BackendError, match=r"malformed trace") as refused:
        ReplayBackend(path)
    assert "\n" not in str(refused.value)


async def test_the_app_runs_on_a_replayed_trace(
    tmp_path: Path, store: ChatStore, make_app: Callable[..., LingChatApp]
) -> None:
    path = tmp_path / "trace.json"
    _, recorder = await record(path)
    await collect(recorder)
    app = make_app(ReplayBackend(path, speed=5))
    async with app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        assert app.title == "ling-chat · replay x5 of a recorded session"
        await send(pilot, "anything")
        await reply_done(pilot)
        assert app.engine_run_id is not None
        assert store.get_engine_run(app.engine_run_id).kind == "replay"
    (conversation,) = store.list_conversations()
    reply = store.messages(conversation.id)[-1]
    assert (reply.content, reply.reasoning) == ("Hi there", "greeting")
    assert reply.status is MessageStatus.COMPLETE


async def test_the_trace_holds_the_facts_known_after_start_up(tmp_path: Path) -> None:
    inner = ScriptedBackendDouble()
    recorder = RecordingBackend(inner, tmp_path / "trace.json")
    inner.info = replace(inner.info, sglang_version="0.5.23 (read at start-up)")
    assert [stage async for stage in recorder.start()] == list(inner.stages)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["info"]["sglang_version"] == "0.5.23 (read at start-up)"


async def test_the_shipped_gpu_trace_plays_in_the_app(
    store: ChatStore, make_app: Callable[..., LingChatApp]
) -> None:
    """`ling-chat --replay demo`: the H200 recording passes its proof and replays its reply."""
    replay = ReplayBackend(trace_path("demo"), speed=50)
    app = make_app(replay)
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        assert app.proof is not None and app.proof.ok
        assert app.engine_run_id is not None
        assert store.get_engine_run(app.engine_run_id).proof == app.proof.to_dict()
        await send(pilot, "What did each lever do?")
        await reply_done(pilot)
        panel = text_of(screen.query_one("#reply-numbers", Static))
    (conversation,) = store.list_conversations()
    reply = store.messages(conversation.id)[-1]
    recorded = read_trace(trace_path("demo"))["replies"][0]["events"]
    usage = ReplyUsage.from_dict(recorded[-1]["usage"])
    assert reply.status is MessageStatus.COMPLETE
    assert reply.content == "".join(event.get("answer", "") for event in recorded)
    assert reply.stats is not None and reply.stats.accept_length == usage.accept_length
    assert f"accept   {usage.accept_length:.2f}" in panel
    assert f"verify   {usage.verify_rounds:,} rounds" in panel


async def test_the_shipped_trace_replays_its_recorded_usage() -> None:
    replay = ReplayBackend(trace_path("demo"), speed=1000)
    *_, done = [event async for event in replay.stream_reply((), Sampling())]
    recorded = read_trace(trace_path("demo"))["replies"][0]["events"][-1]["usage"]
    assert isinstance(done, ReplyDone)
    assert done.usage == ReplyUsage.from_dict(recorded)
    assert done.usage.accept_length is not None and done.usage.accept_length > 3.5


async def test_a_long_recorded_load_replays_in_a_few_seconds() -> None:
    """The H200 load ticked dozens of times in about a minute; replayed as recorded, capped
    in all."""
    clock = FakeClock()
    replay = ReplayBackend(trace_path("demo"), clock=clock, sleep=clock.sleep)
    began = clock()
    stages = [stage async for stage in replay.start()]
    took = clock() - began
    assert len(stages) == len(read_trace(trace_path("demo"))["stages"]) > 20
    assert stages[-1].elapsed_s > 5 * MAX_START_S
    assert 0.8 * MAX_START_S < took <= MAX_START_S + 1e-9


def test_an_unknown_trace_name_is_a_path(tmp_path: Path) -> None:
    assert trace_path(tmp_path / "t.json") == tmp_path / "t.json"
    assert trace_path("demo").name == "h200-stack-known-answer.trace.json"


async def test_a_recording_that_cannot_be_written_leaves_the_chat_going(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the trace's folder should be")
    inner = ScriptedBackendDouble()
    inner.enqueue(answer_reply("Hi", step_s=0.0))
    recorder = RecordingBackend(inner, blocker / "trace.json")
    assert [stage async for stage in recorder.start()] == list(inner.stages)
    assert recorder.save_error is not None and str(blocker) in recorder.save_error
    events = await collect(recorder)
    assert isinstance(events[-1], ReplyDone)
    assert "".join(e.answer for e in events if isinstance(e, TextChunk)) == "Hi"


def test_the_shipped_demo_names_its_model_without_a_temp_path() -> None:
    trace = read_trace(trace_path("demo"))
    assert trace["info"]["model"] == "ling-3.0-flash-shaped-known-answer"
    assert "pytest-of" not in json.dumps(trace)


async def test_a_recording_names_a_local_model_by_its_folder_only(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    inner = ScriptedBackendDouble()
    inner.info = replace(inner.info, model=str(tmp_path / "models" / "ling-flash"))
    recorder = RecordingBackend(inner, path)
    async for _stage in recorder.start():
        pass
    assert read_trace(path)["info"]["model"] == "ling-flash"


@pytest.mark.parametrize("speed", [0.25, 4.0])
async def test_a_replay_at_any_speed_stamps_events_with_their_recorded_time(
    tmp_path: Path, speed: float
) -> None:
    """Played at `speed`, the events come `speed` times sooner or later, stamped as recorded."""
    path = tmp_path / "trace.json"
    clock = FakeClock()
    _, recorder = await record(path, step_s=0.1, clock=clock)
    started = clock()
    recorded_times = relative(await collect(recorder), started)
    replay = ReplayBackend(path, speed=speed, clock=clock, sleep=clock.sleep)
    assert replay.info.replay_speed == speed
    started = clock()
    played = await collect(replay)
    assert relative(played, started) == pytest.approx(recorded_times)
    assert clock() - started == pytest.approx(recorded_times[-1] / speed)


async def test_a_stopped_replay_ends_at_the_recorded_time_reached(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    clock = FakeClock()
    await collect((await record(path, step_s=0.1, clock=clock))[1])
    replay = ReplayBackend(path, speed=0.5, clock=clock, sleep=clock.sleep)
    started = clock()
    stream = cast(AsyncGenerator[ReplyEvent, None], replay.stream_reply(HELLO, Sampling()))
    first = await anext(stream)
    await replay.stop_reply()
    done = await anext(stream)
    assert isinstance(done, ReplyDone) and done.finish_reason == "abort"
    played_s = clock() - started  # x0.5: twice the recorded time
    assert done.at - started == pytest.approx(played_s * 0.5)
    assert done.at >= first.at


async def test_a_stop_that_comes_late_ends_the_reply_before_the_chunk_not_played(
    tmp_path: Path,
) -> None:
    """A loop that comes back after the next chunk's time (here: the clock jumps past it)
    still ends the reply no later than that chunk, which it never showed."""
    path = tmp_path / "trace.json"
    clock = FakeClock()
    await collect((await record(path, step_s=0.1, clock=clock))[1])
    replay = ReplayBackend(path, clock=clock, sleep=clock.sleep)
    started = clock()
    stream = cast(AsyncGenerator[ReplyEvent, None], replay.stream_reply(HELLO, Sampling()))
    first = await anext(stream)
    clock.advance(5.0)  # far past the recorded reply's end
    await replay.stop_reply()
    done = await anext(stream)
    assert isinstance(done, ReplyDone) and done.finish_reason == "abort"
    second_chunk_s = 0.2  # record(step_s=0.1): chunks at 0.1, 0.2, 0.3
    assert first.at - started == pytest.approx(0.1)
    assert done.at - started == pytest.approx(second_chunk_s)
