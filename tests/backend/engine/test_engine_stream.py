"""The engine's event bridge: SGLang chunks on the engine thread become UI events in order.

SGLang is replaced by `SGLangEngineDouble` (the user never sees it) and its ling3
reasoning parser by the engine double's (`tests/fixtures/engine_double`); the thread,
loop and queue are the real ones.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import types
from typing import Any

import pytest

from app.backend.engine import engine as engine_module
from app.backend.engine import thread as thread_module
from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.backend.engine.thread import EngineThread
from app.backend.protocol import ReplyDone, ReplyError, TextChunk
from app.bench.engine_calls import generate
from app.core.chat import ChatMessage, Role, Sampling, fit_to_context
from app.core.errors import ContextFull, EngineCrashed
from tests.fixtures.engine_double.sglang.srt.parser import (
    reasoning_parser as reasoning_parser_double,
)
from tests.support.timeouts import scaled
from tests.support.waiting import eventually


class TokenizerDouble:
    """A chat template of tags, and one token per character; it keeps the template's options."""

    def __init__(self) -> None:
        self.template_kwargs: list[dict[str, Any]] = []

    def apply_chat_template(self, turns: list[dict[str, str]], **kwargs: Any) -> str:
        self.template_kwargs.append(kwargs)
        return "".join(f"<{t['role']}>{t['content']}" for t in turns) + "<assistant>"

    def __call__(self, texts: list[str], **_: Any) -> dict[str, list[list[int]]]:
        return {"input_ids": [[ord(c) for c in text] for text in texts]}


class SGLangEngineDouble:
    """Streams cumulative text like `Engine.async_generate(stream=True)`."""

    def __init__(
        self,
        pieces: list[str],
        finish: dict[str, Any] | None,
        context_len: int = 32768,
        stall_after: int | None = None,
    ) -> None:
        self.pieces, self.finish, self.stall_after = pieces, finish, stall_after
        self.prompts: list[str] = []
        self.max_new_tokens: list[int] = []
        self.aborted: list[str] = []
        self.cancelled = 0
        """Streams cancelled while waiting for their next chunk."""
        self.stalled = threading.Event()
        """Set once a stream reaches `stall_after` and hangs there."""
        self.tokenizer_manager = types.SimpleNamespace(
            tokenizer=TokenizerDouble(),
            abort_request=self.aborted.append,
            context_len=context_len,
            num_reserved_tokens=1,
        )

    async def async_generate(
        self,
        *,
        input_ids: list[int],
        sampling_params: Any,
        stream: bool,
        rid: str | None = None,
        prompt: str | None = None,
    ):
        self.prompts.append("".join(map(chr, input_ids)))
        self.max_new_tokens.append(sampling_params["max_new_tokens"])

        async def chunks():
            text = ""
            for i, piece in enumerate(self.pieces, 1):
                await asyncio.sleep(0.02)
                if i == self.stall_after:  # the next chunk never comes; an abort ends it
                    self.stalled.set()
                    try:
                        while rid not in self.aborted:
                            await asyncio.sleep(0.01)
                    except asyncio.CancelledError:
                        self.cancelled += 1
                        raise
                if rid in self.aborted:
                    yield {"text": text, "meta_info": {"finish_reason": {"type": "abort"}}}
                    return
                text += piece
                last = i == len(self.pieces)
                meta = {"completion_tokens": i, "finish_reason": self.finish if last else None}
                if last and self.finish:
                    meta.update(spec_accept_length=3.0, spec_verify_ct=1)
                yield {"text": text, "meta_info": meta}

        return chunks()


@pytest.fixture
def parser_double(monkeypatch):
    monkeypatch.setitem(sys.modules, "sglang.srt.parser.reasoning_parser", reasoning_parser_double)


def running(engine: SGLangEngineDouble, tmp_path) -> EngineBackend:
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    backend._engine, backend._thread = engine, EngineThread()
    return backend


async def collect(backend: EngineBackend) -> list[Any]:
    messages = [ChatMessage(Role.SYSTEM, "be brief"), ChatMessage(Role.USER, "hi")]
    return [event async for event in backend.stream_reply(messages, Sampling())]


async def test_chunks_arrive_in_order_with_reasoning_apart(parser_double, tmp_path):
    engine = SGLangEngineDouble(["Let me ", "think.</think>The ", "answer."], {"type": "stop"})
    backend = running(engine, tmp_path)
    events = await collect(backend)
    await backend.shutdown()
    chunks = [e for e in events if isinstance(e, TextChunk)]
    assert "".join(c.reasoning for c in chunks) == "Let me think."
    assert "".join(c.answer for c in chunks) == "The answer."
    assert [c.completion_tokens for c in chunks] == [1, 2, 3]
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.finish_reason == "stop"
    assert done.usage.accept_length == 3.0
    assert engine.prompts == ["<system>be brief<user>hi<assistant>"]


async def test_the_chat_template_is_asked_for_thinking_as_the_recipe_does(parser_double, tmp_path):
    engine = SGLangEngineDouble(["Hm.</think>Hi."], {"type": "stop"})
    backend = running(engine, tmp_path)
    await collect(backend)
    await backend.shutdown()
    (kwargs,) = engine.tokenizer_manager.tokenizer.template_kwargs
    assert kwargs == {"tokenize": False, "add_generation_prompt": True, "enable_thinking": True}


async def test_a_stream_without_a_finish_reason_ends_in_an_error(parser_double, tmp_path):
    backend = running(SGLangEngineDouble(["partial"], None), tmp_path)
    events = await collect(backend)
    await backend.shutdown()
    assert isinstance(events[0], TextChunk)
    assert isinstance(events[-1], ReplyError)
    assert "without a finish reason" in events[-1].message


async def test_leaving_a_reply_early_aborts_its_request(parser_double, tmp_path):
    engine = SGLangEngineDouble(["a", "b", "c", "d"], {"type": "stop"})
    backend = running(engine, tmp_path)
    stream = backend.stream_reply([ChatMessage(Role.USER, "hi")], Sampling())
    first = await anext(stream)
    await stream.aclose()
    await backend.shutdown()
    assert isinstance(first, TextChunk)
    assert len(engine.aborted) == 1


async def test_a_long_conversation_gets_the_room_left_in_the_context(parser_double, tmp_path):
    prompt_tokens = len("<system>be brief<user>hi<assistant>") + 1  # one reserved token
    engine = SGLangEngineDouble(["ok"], {"type": "length"}, context_len=prompt_tokens + 100)
    backend = running(engine, tmp_path)
    assert backend.info.context_length == prompt_tokens + 100
    events = await collect(backend)
    await backend.shutdown()
    assert engine.max_new_tokens == [100]
    assert isinstance(events[-1], ReplyDone)
    assert backend.info.context_length is None  # the engine is gone


async def test_a_conversation_that_fills_the_context_is_a_one_line_error(parser_double, tmp_path):
    engine = SGLangEngineDouble(["never sent"], {"type": "stop"}, context_len=20)
    backend = running(engine, tmp_path)
    events = await collect(backend)
    await backend.shutdown()
    assert engine.prompts == []
    (error,) = events
    assert isinstance(error, ReplyError)
    assert "fills the model's context (20 tokens)" in error.message
    assert "\n" not in error.message


def test_the_reply_budget_is_what_was_asked_or_the_room_left():
    asked = Sampling(max_new_tokens=4096)
    assert fit_to_context(asked, used=12, context=32768) == asked
    assert fit_to_context(asked, used=12, context=4096) == Sampling(max_new_tokens=4084)
    with pytest.raises(ContextFull, match=r"fills the model's context \(4096 tokens\)"):
        fit_to_context(asked, used=5000, context=4096)


async def test_a_scheduler_that_dies_mid_reply_ends_it_in_an_error(
    parser_double, tmp_path, monkeypatch
):
    monkeypatch.setattr(thread_module, "CRASH_POLL_S", 0.05)
    # SGLang's stream never ends once its scheduler is dead; its watchdog SIGQUITs us.
    engine = SGLangEngineDouble(["a", "b", "never"], {"type": "stop"}, stall_after=3)
    backend = running(engine, tmp_path)
    events = []
    async for event in backend.stream_reply([ChatMessage(Role.USER, "hi")], Sampling()):
        events.append(event)
        if len(events) == 2:
            backend.processes.died.set()  # a SIGQUIT came and the scheduler is gone
    assert [type(e) for e in events] == [TextChunk, TextChunk, ReplyError]
    assert "scheduler died" in events[-1].message
    later = await collect(backend)
    await backend.shutdown()
    assert len(later) == 1 and isinstance(later[0], ReplyError)


async def test_a_request_whose_scheduler_dies_raises_the_cause_from_this_boot_s_log(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(thread_module, "CRASH_POLL_S", 0.05)
    # The bench's requests: on the H200 a dead scheduler left one waiting for minutes.
    engine = SGLangEngineDouble(["a", "never"], {"type": "stop"}, stall_after=2)
    backend = running(engine, tmp_path)
    backend.log_file.write_text("RuntimeError: an earlier boot's error\n")
    backend.log.start = backend.log_file.stat().st_size
    with backend.log_file.open("a") as log:
        log.write("Traceback (most recent call last):\n")
        log.write("ModuleNotFoundError: No module named 'flashinfer'\n")
    params = {"max_new_tokens": 8, "temperature": 0.6}
    request = asyncio.ensure_future(generate(backend, input_ids=[1, 2], sampling_params=params))
    await eventually(engine.stalled.is_set)
    assert not request.done()  # stalled, as SGLang's stream is once its scheduler is dead
    backend.processes.died.set()  # a SIGQUIT came and the scheduler is gone
    cause = r"\(ModuleNotFoundError: No module named 'flashinfer'\): restart ling-chat"
    with pytest.raises(EngineCrashed, match=rf"^SGLang's scheduler died {cause}"):
        await asyncio.wait_for(request, timeout=scaled(5))
    with pytest.raises(EngineCrashed):  # the next request fails at once
        await asyncio.wait_for(generate(backend, input_ids=[1], sampling_params=params), 1)
    await backend.shutdown()


async def test_cancelling_a_request_stops_it_on_the_engine_thread(tmp_path):
    engine = SGLangEngineDouble(["a", "never"], {"type": "stop"}, stall_after=2)
    backend = running(engine, tmp_path)
    params = {"max_new_tokens": 8}
    request = asyncio.ensure_future(generate(backend, input_ids=[1, 2], sampling_params=params))
    await eventually(engine.stalled.is_set)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    await eventually(lambda: engine.cancelled == 1)  # the engine loop runs the cancellation
    await backend.shutdown()


async def test_a_stop_returns_even_when_the_engine_loop_hangs(parser_double, tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "ABORT_WAIT_S", 0.2)  # what a stop waits for the loop
    # The quit stops the reply in flight before shutting SGLang down: it must not wait on
    # an engine loop that never takes the abort.
    engine = SGLangEngineDouble(["a", "never"], {"type": "stop"}, stall_after=2)
    backend = running(engine, tmp_path)
    reply = asyncio.ensure_future(collect(backend))
    await eventually(engine.stalled.is_set)  # the first chunk is in, the second never comes
    release = threading.Event()
    backend._thread.loop.call_soon_threadsafe(release.wait, 30)  # the loop hangs
    try:
        await asyncio.wait_for(backend.stop_reply(), timeout=scaled(1.2))
    finally:
        release.set()
    reply.cancel()
    await asyncio.gather(reply, return_exceptions=True)
    await backend.shutdown()


class WatchdogDouble:
    """SGLang's subprocess watchdog: stopped from any thread."""

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stopped.set()


async def test_shutdown_stops_the_watchdog_even_when_the_engine_loop_hangs(tmp_path, monkeypatch):
    monkeypatch.setattr(engine_module, "ABORT_WAIT_S", 0.2)  # what it waits for the loop
    monkeypatch.setattr(thread_module, "STOP_WAIT_S", 0.2)
    engine = SGLangEngineDouble(["a"], {"type": "stop"})
    engine.tokenizer_manager._subprocess_watchdog = WatchdogDouble()
    backend = running(engine, tmp_path)
    release = threading.Event()
    backend._thread.loop.call_soon_threadsafe(release.wait, 30)  # the loop hangs
    try:
        await asyncio.wait_for(backend.shutdown(), timeout=scaled(5))
    finally:
        release.set()
    assert engine.tokenizer_manager._subprocess_watchdog.stopped.is_set()


def test_a_crash_message_blames_nothing_from_an_earlier_boot(tmp_path):
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    backend.log_file.write_text("RuntimeError: an earlier boot's error\n")
    backend.log.start = backend.log_file.stat().st_size
    with backend.log_file.open("a") as log:
        log.write("this boot: killed without a traceback\n")
    assert backend.log.crash_message().startswith("SGLang's scheduler died: restart ling-chat")
