"""The Textual app chats through the real engine on a GPU, and records a replayable trace.

Writes the demo trace (`replay.DEMO_TRACE`) and a screenshot to $OUT (or the test's tmp
dir), recorded with the default profile; the trace is what `assets/` ships for
`ling-chat --replay demo`: copy it there as it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("sglang", reason="needs SGLang")
from app.backend.replay import DEMO_TRACE, RecordingBackend, ReplayBackend  # noqa: E402
from app.core.reply_usage import ReplyUsage  # noqa: E402
from app.levers.profiles import DEFAULT_PROFILE
from tests.gpu.app_chat import chat_through_app  # noqa: E402
from tests.gpu.test_engine_gpu import make_backend  # noqa: E402

pytestmark = pytest.mark.gpu
QUESTIONS = ("What did each lever do?", "And how is accept length measured?")
MIN_STREAM_S = 2.0
"""A demo reply streams at least this long at its recorded speed, long enough to watch it and
to press Esc (the known answer is about 2,300 tokens; the 6-layer stack decodes ~600 tok/s)."""


def tokens_per_chunk(trace: dict) -> list[tuple[float, float]]:
    """Per reply: mean tokens per streamed chunk (after the first) and SGLang's accept length."""
    rows = []
    for reply in trace["replies"]:
        counts = [e["completion_tokens"] for e in reply["events"] if e["type"] == "chunk"]
        steps = [b - a for a, b in zip(counts, counts[1:], strict=False) if b > a]
        accept = ReplyUsage.from_dict(reply["events"][-1]["usage"]).accept_length
        rows.append((sum(steps) / len(steps) if steps else 0.0, accept))
    return rows


def stream_seconds(trace: dict) -> list[float]:
    """Per reply: seconds from its first chunk to its end, as recorded."""
    return [
        reply["events"][-1]["t"] - next(e["t"] for e in reply["events"] if e["type"] == "chunk")
        for reply in trace["replies"]
    ]


async def test_the_app_chats_through_the_engine_and_records_a_trace(tmp_path, monkeypatch):
    out = Path(os.environ.get("OUT") or tmp_path)
    trace_path = out / DEMO_TRACE
    engine = make_backend(tmp_path, monkeypatch, profile=DEFAULT_PROFILE)
    backend = RecordingBackend(engine, trace_path)
    await chat_through_app(backend, tmp_path / "history.db", QUESTIONS, out / "ui-on-gpu.svg")
    trace = json.loads(trace_path.read_text())
    for per_chunk, accept in tokens_per_chunk(trace):
        print(f"tokens per streamed chunk {per_chunk:.2f} vs SGLang accept length {accept:.2f}")
    seconds = stream_seconds(trace)
    print(f"profile {trace['info']['profile']}; each reply streamed for {seconds} s")
    assert ReplayBackend(trace_path).reply_count == len(QUESTIONS)
    assert trace["info"]["profile"] == DEFAULT_PROFILE
    assert min(seconds) >= MIN_STREAM_S
