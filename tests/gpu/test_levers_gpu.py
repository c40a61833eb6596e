"""The opt-in levers on a real GPU: `stack+bf16-router` and `dspark+fp8-draft` pass every
proof line, the router gates and the draft's layer linears are what the lever says, and the
known answer streams (the target decides every token).

Run on the GPU machine: `python -m pytest tests/gpu/test_levers_gpu.py --run-gpu -s`
(42 layers: LING_CHAT_TEST_LAYERS=42 LING_CHAT_TEST_MEM_FRACTION=0.65).
Known-answer weights silence every sublayer, so routing cannot change the answer: these
tests prove the levers engaged and their bytes, not their accuracy on real weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backend.engine.engine import EngineBackend
from app.backend.protocol import ReplyDone, TextChunk
from app.core.chat import ChatMessage, Role, Sampling
from app.core.proof_report import ProofReport, Verdict
from app.render.proof import format_report
from tests.gpu import dspark_models, models

known_answer = pytest.importorskip("tests.gpu.known_answer", reason="needs torch and SGLang")
pytestmark = pytest.mark.gpu


def make_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str) -> EngineBackend:
    layers = models.layers()
    model = models.write_model_dir(tmp_path / "model", layers, known_answer=True)
    monkeypatch.setenv(known_answer.KNOWN_ANSWER_ENV, "1")
    monkeypatch.delenv(known_answer.BREAKAGE_ENV, raising=False)
    overrides = {}
    if profile.startswith("dspark"):
        draft = dspark_models.write_draft_dir(tmp_path / "draft", layers)
        overrides["speculative_draft_model_path"] = str(draft)
    return known_answer.engine(
        model,
        tmp_path / "logs",
        profile=profile,
        min_accept_length=1.0,  # the DSpark draft's random weights: a timing number only
        overrides=overrides,
    )


async def proven_reply(backend: EngineBackend) -> tuple[ProofReport, str, ReplyDone]:
    """Boot, judge, stream one greedy known-answer reply; the engine is shut down after."""
    try:
        async for stage in backend.start():
            print(f"[{stage.elapsed_s:6.1f}s] {stage.name} {'done' if stage.done else '...'}")
        report = await backend.proof()
        print(format_report(report))
        messages = [ChatMessage(Role.USER, "What did each lever do?")]
        events = [e async for e in backend.stream_reply(messages, Sampling(temperature=0.0))]
    finally:
        await backend.shutdown()
    done = events[-1]
    assert isinstance(done, ReplyDone), done
    print(f"meta {done.usage}")
    return report, "".join(e.answer for e in events if isinstance(e, TextChunk)), done


def line(report: ProofReport, key: str) -> str:
    found = next(x for x in report.lines if x.key == key)
    assert found.verdict is Verdict.PASS, found
    return f"{found.title}: {found.evidence}"


async def test_the_bf16_router_passes_every_line_with_every_gate_bf16(tmp_path, monkeypatch):
    report, text, done = await proven_reply(
        make_backend(tmp_path, monkeypatch, "stack+bf16-router")
    )
    assert report.ok and all(x.verdict is Verdict.PASS for x in report.lines), format_report(report)
    router = line(report, "router")
    moe = models.layers() - 2  # the first two layers are dense
    assert f"router gates ({moe} target, 1 draft): bfloat16 {moe + 1}" in router, router
    assert "router_dtype 'bf16'" in router
    assert text.strip() == models.expected_reply()[1].strip()
    assert done.usage.accept_length is not None and done.usage.accept_length >= 3.5


async def test_the_fp8_draft_passes_every_line_with_its_layer_linears_fp8(tmp_path, monkeypatch):
    report, text, _done = await proven_reply(
        make_backend(tmp_path, monkeypatch, "dspark+fp8-draft")
    )
    assert report.ok and all(x.verdict is Verdict.PASS for x in report.lines), format_report(report)
    weights = line(report, "dspark_weights")
    linears = 4 * dspark_models.DRAFT_LAYERS
    assert f"{linears} layer linears: Fp8LinearMethod {linears}" in weights, weights
    assert text.strip() == models.expected_reply()[1].strip()
