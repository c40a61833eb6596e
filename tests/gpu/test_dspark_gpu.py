"""The `dspark` profile on a real GPU: it passes every proof line, each breakage is refused,
and the app raises its collapse banner on the draft's accept length.

Run on the GPU machine: `python -m pytest tests/gpu/test_dspark_gpu.py -m gpu --run-gpu -s`
(42 layers: LING_CHAT_TEST_LAYERS=42).
The target is the known-answer Ling model of tests/gpu/models.py; the draft is
tests/gpu/dspark_models.py's, with dummy weights, so its accept length is a timing
number only: the floor here is 1.0, and the head is proven by identity and capture.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.engine import EngineBackend
from app.backend.protocol import ReplyDone, TextChunk
from app.commands.doctor import run_doctor
from app.core.chat import ChatMessage, Role, Sampling
from app.core.errors import ConfigError
from app.core.proof_report import Verdict
from app.render.proof import format_report
from tests.gpu import dspark_models, models
from tests.gpu.app_chat import chat_through_app

known_answer = pytest.importorskip("tests.gpu.known_answer", reason="needs torch and SGLang")
pytestmark = pytest.mark.gpu


def make_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **overrides: Any
) -> EngineBackend:
    layers = models.layers()
    model = models.write_model_dir(tmp_path / "model", layers, known_answer=True)
    draft = dspark_models.write_draft_dir(tmp_path / "draft", layers)
    monkeypatch.setenv(known_answer.KNOWN_ANSWER_ENV, "1")
    monkeypatch.delenv(known_answer.BREAKAGE_ENV, raising=False)
    return known_answer.engine(
        model,
        tmp_path / "logs",
        profile="dspark",
        min_accept_length=1.0,
        overrides={"speculative_draft_model_path": str(draft), **overrides},
    )


async def test_dspark_passes_every_line_and_streams_a_reply(tmp_path, monkeypatch):
    backend = make_backend(tmp_path, monkeypatch)
    try:
        async for stage in backend.start():
            print(f"[{stage.elapsed_s:6.1f}s] {stage.name} {'done' if stage.done else '...'}")
        report = await backend.proof()
        print(format_report(report))
        assert report.ok and all(line.verdict is Verdict.PASS for line in report.lines)
        events = [
            e
            async for e in backend.stream_reply(
                [ChatMessage(Role.USER, "What did each lever do?")], Sampling(temperature=0.0)
            )
        ]
        done = events[-1]
        text = "".join(e.answer for e in events if isinstance(e, TextChunk))
        print(f"reply {text!r}; meta {getattr(done, 'usage', None)}")
        # The target decides every token: the draft only changes how many a round commits.
        assert isinstance(done, ReplyDone) and done.finish_reason == "stop"
        assert text.strip() == models.expected_reply()[1].strip()
    finally:
        await backend.shutdown()


async def test_the_app_raises_the_collapse_banner_on_the_random_draft(tmp_path, monkeypatch):
    out = Path(os.environ.get("OUT") or tmp_path)
    await chat_through_app(
        make_backend(tmp_path, monkeypatch),
        tmp_path / "history.db",
        ("What did each lever do?", "And how is accept length measured?"),
        out / "ui-dspark-collapse.svg",
        min_accept=1.0,
        banner="Speculative decoding has collapsed",
    )


BREAKAGES = {
    # the known-answer entry hands the draft a BF16 view of the FP8 head's bytes
    "bf16_view_head": ("dspark_bf16_view", {}, "dspark_head"),
    "replayssm_off": (None, {"enable_linear_replayssm_spec": False}, "replayssm"),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
async def test_dspark_breakage_is_refused(name, tmp_path, monkeypatch):
    breakage, overrides, key = BREAKAGES[name]
    backend = make_backend(tmp_path, monkeypatch, **overrides)
    if breakage:
        monkeypatch.setenv(known_answer.BREAKAGE_ENV, breakage)
    report = await run_doctor(backend)
    verdicts = {line.key: line.verdict for line in report.lines}
    assert verdicts[key] is Verdict.FAIL, format_report(report)


def test_a_wrong_ring_length_is_refused_before_the_gpu_is_touched(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match="power of two"):
        make_backend(tmp_path, monkeypatch, linear_replayssm_cache_len=24)
