"""The engine on a real GPU: the stack passes its proof, and every breakage is refused.

Run on the GPU machine: `python -m pytest tests/gpu -m gpu --run-gpu -s`. Each test
boots its own SGLang engine on a 6-layer Ling-3.0-flash-shaped model (real hidden,
expert and vocab shapes; dummy or known-answer weights).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.engine import EngineBackend
from app.backend.protocol import ReplyDone, TextChunk
from app.commands.doctor import run_doctor
from app.core.chat import ChatMessage, Role, Sampling
from app.core.errors import EngineCrashed
from app.core.proof_report import ProofReport, Verdict
from app.levers.profiles import PROFILES
from app.render.proof import format_report
from tests.gpu import models

known_answer = pytest.importorskip("tests.gpu.known_answer", reason="needs torch and SGLang")
pytestmark = pytest.mark.gpu
MIN_ACCEPT = 1.5
MODEL_DIR = "ling-3.0-flash-shaped-known-answer"
"""The model's folder: a recorded trace names the model by it (`assets/*.trace.json`)."""


def make_backend(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    profile: str = "stack",
    known: bool = True,
    breakage: str | None = None,
    overrides: dict[str, Any] | None = None,
) -> EngineBackend:
    model = models.write_model_dir(tmp_path / MODEL_DIR, models.layers(), known_answer=known)
    monkeypatch.setenv(known_answer.KNOWN_ANSWER_ENV, "1" if known else "0")
    if breakage:
        monkeypatch.setenv(known_answer.BREAKAGE_ENV, breakage)
    else:
        monkeypatch.delenv(known_answer.BREAKAGE_ENV, raising=False)
    return known_answer.engine(
        model,
        tmp_path / "logs",
        profile=profile,
        min_accept_length=MIN_ACCEPT,
        overrides=overrides,
    )


async def proof_of(backend: EngineBackend) -> ProofReport:
    """Boot, print the doctor's report, shut down."""
    return await run_doctor(backend)


def verdicts(report: ProofReport) -> dict[str, Verdict]:
    return {line.key: line.verdict for line in report.lines}


@pytest.mark.parametrize("profile", ["stack", "stack-recurrent"], ids=["replayssm", "recurrent"])
async def test_stack_passes_every_line_and_streams_a_reply(tmp_path, monkeypatch, profile):
    backend = make_backend(tmp_path, monkeypatch, profile=profile)
    try:
        async for stage in backend.start():
            print(f"[{stage.elapsed_s:6.1f}s] {stage.name} {'done' if stage.done else '...'}")
        report = await backend.proof()
        print(format_report(report))
        assert report.ok, format_report(report)
        assert all(line.verdict is Verdict.PASS for line in report.lines)
        assert ("replayssm" in verdicts(report)) == PROFILES[profile].has("replayssm")
        graphs = next(line.evidence for line in report.lines if line.key == "cuda_graphs")
        assert "prefill: off" in graphs and "draft_extend 1 graph(s)" in graphs, graphs
        messages = [ChatMessage(Role.USER, "What did each lever do?")]
        reasoning, answer, chunks, done = "", "", [], None
        async for event in backend.stream_reply(messages, Sampling(temperature=0.0)):
            if isinstance(event, TextChunk):
                reasoning += event.reasoning
                answer += event.answer
                chunks.append(event)
            elif isinstance(event, ReplyDone):
                done = event
            else:
                print(f"reply error: {event.message}")
        # Printed before the asserts: a run killed at its time limit still shows them.
        print(f"reasoning {reasoning!r}\nanswer {answer!r}", flush=True)
        want_reasoning, want_answer = models.expected_reply()
        assert reasoning.strip() == want_reasoning.strip()
        assert answer.strip() == want_answer.strip()
        assert done is not None and done.finish_reason == "stop"
        accept = done.usage.accept_length
        tokens = done.usage.completion_tokens
        seconds = done.at - chunks[0].at
        print(
            f"reply: {tokens} tokens in {len(chunks)} chunks, accept length {accept:.2f}, "
            f"{(tokens - 1) / seconds:.1f} tok/s after the first chunk"
        )
        assert accept >= 3.5
        # The chat's own sampling (T 0.6, top-p 0.95, top-k 29): NEXTN verifies sampled
        # drafts with FlashInfer's renormalisation, which greedy decoding never runs. The
        # known-answer model's logits have one clear winner, so the reply stays the same.
        sampled = [e async for e in backend.stream_reply(messages, Sampling())]
        last = sampled[-1]
        text = "".join(e.answer for e in sampled if isinstance(e, TextChunk))
        assert isinstance(last, ReplyDone) and last.finish_reason == "stop"
        sampled_accept = last.usage.accept_length
        print(f"sampled reply: {len(text)} characters, accept length {sampled_accept:.2f}")
        assert text.strip() == want_answer.strip()
        assert sampled_accept >= 3.5
    finally:
        await backend.shutdown()


async def test_random_weights_collapse_is_measured_and_refused(tmp_path, monkeypatch):
    report = await proof_of(make_backend(tmp_path, monkeypatch, known=False))
    failed = [line.key for line in report.failed]
    assert failed == ["accept_length"], format_report(report)
    assert report.facts["warmup_accept_length"] < 1.2


BREAKAGES = {
    "no_fp8_hook": ({"breakage": "no_fp8_hook"}, "fp8_head"),
    "weight_only_share": ({"breakage": "weight_only_share"}, "shared_head"),
    "bf16_view_share": ({"breakage": "bf16_view_share"}, "shared_head"),
    "bf16_view_share_unguarded": ({"breakage": "bf16_view_share_unguarded"}, "accept_length"),
    "fp32_head_with_fp8": ({"overrides": {"enable_fp32_lm_head": True}}, "fp32_head"),
    "speculation_off": (
        {
            "overrides": {
                "speculative_algorithm": None,
                "speculative_draft_model_path": None,
                "speculative_num_steps": None,
                "speculative_eagle_topk": None,
                "speculative_num_draft_tokens": None,
                "enable_linear_replayssm_spec": None,
                "linear_replayssm_cache_len": None,
            }
        },
        "nextn",
    ),
    "marlin_moe": ({"overrides": {"moe_runner_backend": "marlin"}}, "humming"),
}


@pytest.mark.parametrize("name", list(BREAKAGES))
async def test_breakage_is_refused(name, tmp_path, monkeypatch):
    kwargs, key = BREAKAGES[name]
    report = await proof_of(make_backend(tmp_path, monkeypatch, **kwargs))
    assert not report.ok
    assert verdicts(report)[key] is Verdict.FAIL, format_report(report)


async def test_decode_graphs_off_fail_the_graphs_line_first(tmp_path, monkeypatch):
    """Past the CLI's override check (as a Python caller could): the running model's graph
    runners hold nothing, and the graphs line names that before the lines it causes."""
    overrides = {"cuda_graph_backend_decode": "disabled"}
    report = await proof_of(make_backend(tmp_path, monkeypatch, overrides=overrides))
    assert report.failed[0].key == "cuda_graphs", format_report(report)
    assert report.failed[0].evidence.startswith("captured: none; not captured: target_verify")


async def test_humming_left_on_auto_does_not_start_as_proven(tmp_path, monkeypatch):
    backend = make_backend(tmp_path, monkeypatch, overrides={"moe_runner_backend": "auto"})
    try:
        report = await proof_of(backend)
    except EngineCrashed as exc:  # no FlashInfer on this machine: auto's choice cannot load
        print(f"refused: {exc}")
        return
    assert verdicts(report)["humming"] is Verdict.FAIL, format_report(report)
