"""The hot-vocabulary draft head on a real GPU (`stack+hot-vocab`, 6 layers, known answer):
every proof line passes, its own included, and the reply is the stack's known answer; with
every token of the answer hot the drafts are accepted as the stack's are (accept 4.00 but
for a reply's last round), and with half of them cold acceptance drops while the reply
stays the same (the verify reads the full head).

Run on the GPU machine: `python -m pytest tests/gpu/test_hot_vocab_gpu.py --run-gpu -s`
(`lab/scripts/gpu_agenda.sh hot-vocab`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.backend.engine.engine import EngineBackend
from app.backend.protocol import ReplyDone, TextChunk
from app.core.chat import ChatMessage, Role, Sampling
from app.core.proof_report import ProofReport, Verdict
from app.levers.draft.hot_list import HotList
from app.levers.draft.hot_vocab import ROWS
from app.render.proof import format_report
from tests.gpu import models

known_answer = pytest.importorskip("tests.gpu.known_answer", reason="needs torch and SGLang")
pytestmark = pytest.mark.gpu


def hot_list(cold: frozenset[int]) -> HotList:
    """The known answer's tokens but `cold`, then fillers up to ROWS ids."""
    walk = [i for i in models.cycle() if i not in cold]
    taken = set(models.cycle())
    fillers = (i for i in range(models.VOCAB) if i not in taken)
    ids = [*walk, *(next(fillers) for _ in range(ROWS - len(walk)))]
    return HotList(tuple(ids), models.VOCAB, "0" * 64, "the known answer's tokens")


def half_the_answer_cold() -> frozenset[int]:
    """Every other token of the answer (the reasoning, `</think>` and the end stay hot)."""
    answer = models.cycle()[len(models.REASONING) + 2 : -1]
    return frozenset(answer[1::2])


def make_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cold: frozenset[int]
) -> EngineBackend:
    model = models.write_model_dir(tmp_path / "model", models.layers(), known_answer=True)
    listed = tmp_path / "hot.json"
    listed.write_text(hot_list(cold).to_json(), encoding="utf-8")
    monkeypatch.setenv(known_answer.KNOWN_ANSWER_ENV, "1")
    monkeypatch.setenv(known_answer.HOT_IDS_ENV, str(listed))
    monkeypatch.delenv(known_answer.BREAKAGE_ENV, raising=False)
    return known_answer.engine(
        model, tmp_path / "logs", profile="stack+hot-vocab", min_accept_length=1.0
    )


async def proven_reply(backend: EngineBackend) -> tuple[ProofReport, str, str, ReplyDone]:
    """Boot, judge, stream one greedy reply (reasoning, answer); shut down after."""
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
    chunks = [e for e in events if isinstance(e, TextChunk)]
    reasoning, answer = "".join(e.reasoning for e in chunks), "".join(e.answer for e in chunks)
    print(f"meta {done.usage}\nreasoning {reasoning!r}\nanswer {answer!r}", flush=True)
    return report, reasoning, answer, done


def assert_the_stack_s_reply(reasoning: str, answer: str, done: ReplyDone) -> None:
    want_reasoning, want_answer = models.expected_reply()
    assert reasoning.strip() == want_reasoning.strip()
    assert answer.strip() == want_answer.strip()
    assert done.finish_reason == "stop"


def hot_line(report: ProofReport) -> str:
    line = next(x for x in report.lines if x.key == "hot_vocab")
    assert line.verdict is Verdict.PASS, line
    return line.evidence


async def test_every_answer_token_hot_passes_every_line_at_the_stack_s_acceptance(
    tmp_path, monkeypatch
):
    report, reasoning, answer, done = await proven_reply(
        make_backend(tmp_path, monkeypatch, frozenset())
    )
    assert report.ok and all(x.verdict is Verdict.PASS for x in report.lines), format_report(report)
    evidence = hot_line(report)
    assert f"{ROWS:,} of {models.VOCAB:,} rows sliced from the target's head" in evidence
    assert "bytes equal: True, scales equal: True, own storage: True" in evidence
    assert f"the verify reads float8_e4m3fn [2560, {models.VOCAB}]" in evidence
    assert_the_stack_s_reply(reasoning, answer, done)
    assert done.usage.accept_length is not None and done.usage.accept_length >= 3.5


async def test_cold_answer_tokens_drop_acceptance_and_leave_the_reply_unchanged(
    tmp_path, monkeypatch
):
    report, reasoning, answer, done = await proven_reply(
        make_backend(tmp_path, monkeypatch, half_the_answer_cold())
    )
    assert report.ok, format_report(report)
    hot_line(report)
    assert_the_stack_s_reply(reasoning, answer, done)
    # a cold token is never drafted right: at most one draft of a round is kept
    assert done.usage.accept_length is not None and done.usage.accept_length < 2.5
