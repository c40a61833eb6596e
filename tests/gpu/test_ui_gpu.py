"""The Textual app chats through the real engine on a GPU, and records a replayable trace.

Writes `stack-known-answer.trace.json` and a screenshot to $OUT (or the test's tmp dir);
the trace is what `assets/` ships for `ling-chat --replay`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from app.chat import Role, Sampling
from app.storage import ChatStore, MessageStatus
from tests.gpu import models
from tests.ui.conftest import send, wait_until

pytest.importorskip("sglang", reason="needs SGLang")
from app.backend.replay import RecordingBackend, ReplayBackend  # noqa: E402
from app.ui import LingChatApp  # noqa: E402
from app.ui.screens.chat import ChatScreen  # noqa: E402
from tests.gpu.test_engine_gpu import make_backend  # noqa: E402

pytestmark = pytest.mark.gpu
QUESTIONS = ("What did each lever do?", "And how is accept length measured?")


def ended_replies(store: ChatStore) -> int:
    """Assistant messages no longer being written, over every conversation."""
    return sum(
        message.role is Role.ASSISTANT and message.status is not MessageStatus.PARTIAL
        for conversation in store.list_conversations()
        for message in store.messages(conversation.id)
    )


def tokens_per_chunk(trace: dict) -> list[tuple[float, float]]:
    """Per reply: mean tokens per streamed chunk (after the first) and SGLang's accept length."""
    rows = []
    for reply in trace["replies"]:
        counts = [e["completion_tokens"] for e in reply["events"] if e["type"] == "chunk"]
        steps = [b - a for a, b in zip(counts, counts[1:], strict=False) if b > a]
        accept = reply["events"][-1]["meta_info"].get("spec_accept_length")
        rows.append((sum(steps) / len(steps) if steps else 0.0, accept))
    return rows


async def test_the_app_chats_through_the_engine_and_records_a_trace(tmp_path, monkeypatch):
    began = time.monotonic()

    def say(what: str) -> None:  # flushed: a run cut short still shows how far it got
        print(f"[{time.monotonic() - began:6.1f}s] {what}", flush=True)

    out = Path(os.environ.get("OUT") or tmp_path)
    trace_path = out / "stack-known-answer.trace.json"
    backend = RecordingBackend(make_backend(tmp_path, monkeypatch), trace_path)
    with ChatStore.open(tmp_path / "history.db") as store:
        app = LingChatApp(backend, store, sampling=Sampling(temperature=0.0), proof_hold_s=0)
        try:
            async with app.run_test(size=(120, 40)) as pilot:
                say("waiting for the engine and the proof")
                await wait_until(
                    pilot,
                    lambda: isinstance(app.screen, ChatScreen) or app.return_code is not None,
                    timeout=600,
                )
                screen = app.screen
                assert isinstance(screen, ChatScreen), (
                    f"the app exited at start-up ({app.return_code}): {app._exit_renderables}"
                )
                say("chat screen up")
                for asked, question in enumerate(QUESTIONS, 1):
                    await send(pilot, question)
                    await wait_until(
                        pilot,
                        lambda asked=asked: screen.run is None and ended_replies(store) == asked,
                        timeout=120,
                    )
                    say(f"reply {asked} ended")
                app.save_screenshot(filename="ui-on-gpu.svg", path=str(out))
        finally:  # a failed wait must not leave SGLang running and the test hanging
            await app.close_backend()
        (conversation,) = store.list_conversations()
        messages = store.messages(conversation.id)
    replies = messages[1::2]
    _, answer = models.expected_reply()
    for reply in replies:
        assert reply.status is MessageStatus.COMPLETE
        assert reply.content.strip() == answer.strip()
        assert reply.stats is not None and (reply.stats.accept_length or 0) >= 3.5
        print(
            f"stored reply: {reply.stats.completion_tokens} tokens, "
            f"{reply.stats.decode_tps:.1f} tok/s, TTFT {reply.stats.ttft_s:.3f} s, "
            f"accept {reply.stats.accept_length:.2f}"
        )
    trace = json.loads(trace_path.read_text())
    for per_chunk, accept in tokens_per_chunk(trace):
        print(f"tokens per streamed chunk {per_chunk:.2f} vs SGLang accept length {accept:.2f}")
    assert ReplayBackend(trace_path).reply_count == len(QUESTIONS)
