"""A chat's thinking on the real engine: off gives the answer alone; a budget shorter than the
reasoning cuts the thinking at exactly that many tokens, and the answer follows in full
within its own budget (app.backend.engine.phases.py).

The known-answer model (models.py) walks `<think>`, REASONING (42 tokens), `</think>`,
ANSWER; its chat template closes the thinking at once when `enable_thinking` is false.
One engine boot serves every case (agenda step `thinking`).
"""

from __future__ import annotations

import pytest

from app.backend.protocol import ReplyDone, ReplyError, TextChunk
from app.core.chat import ChatMessage, Role, Sampling, Thinking
from app.render.proof import format_report
from tests.gpu import models

pytest.importorskip("tests.gpu.known_answer", reason="needs torch and SGLang")
from tests.gpu.test_engine_gpu import make_backend  # noqa: E402

pytestmark = pytest.mark.gpu
QUESTION = [ChatMessage(Role.USER, "What did each lever do?")]
BUDGET = 10
"""Thinking tokens allowed in the budget case: well short of the 42 of the reasoning."""


async def reply(backend, sampling: Sampling, thinking: Thinking):
    """(reasoning, answer, tokens at the thinking's last chunk, the ending) of one reply."""
    reasoning, answer, thought_tokens, done = "", "", 0, None
    async for event in backend.stream_reply(QUESTION, sampling, thinking=thinking):
        if isinstance(event, TextChunk):
            reasoning += event.reasoning
            answer += event.answer
            if event.reasoning:
                thought_tokens = event.completion_tokens
        elif isinstance(event, ReplyDone):
            done = event
        elif isinstance(event, ReplyError):
            pytest.fail(f"reply error: {event.message}")
    assert done is not None
    usage = done.usage
    print(
        f"{thinking}: {len(reasoning)} chars thinking ({thought_tokens} tokens), "
        f"{len(answer)} chars answer, {usage.completion_tokens} tokens, "
        f"finish {done.finish_reason}, accept length {usage.accept_length}",
        flush=True,
    )
    return reasoning, answer, thought_tokens, done


async def test_thinking_off_and_a_thinking_budget_on_the_engine(tmp_path, monkeypatch):
    backend = make_backend(tmp_path, monkeypatch)
    want_answer = models.expected_reply()[1]
    answer_tokens = len(models.ANSWER)
    # The answer's own budget: the answer and its end, not the thinking on top.
    answer_only = Sampling(temperature=0.0, max_new_tokens=answer_tokens + 4)
    try:
        async for stage in backend.start():
            print(f"[{stage.elapsed_s:6.1f}s] {stage.name} {'done' if stage.done else '...'}")
        report = await backend.proof()
        print(format_report(report))
        assert report.ok

        reasoning, answer, _, done = await reply(backend, answer_only, Thinking(enabled=False))
        assert reasoning == ""
        assert answer.strip() == want_answer.strip()
        assert done.finish_reason == "stop"
        assert done.usage.completion_tokens <= answer_tokens + 1

        cut = Thinking(enabled=True, budget=BUDGET)
        reasoning, answer, thought, done = await reply(backend, answer_only, cut)
        assert reasoning == "".join(models.REASONING[:BUDGET])  # a token a piece: BUDGET
        assert answer.strip() == want_answer.strip()
        assert done.finish_reason == "stop"
        assert done.usage.completion_tokens >= BUDGET + answer_tokens
        assert done.usage.completion_tokens > answer_only.max_new_tokens  # two budgets

        roomy = Thinking(enabled=True, budget=len(models.REASONING) + 20)
        reasoning, answer, thought, done = await reply(backend, answer_only, roomy)
        assert reasoning.strip() == "".join(models.REASONING).strip()
        assert answer.strip() == want_answer.strip()
        assert done.finish_reason == "stop"
        accept = done.usage.accept_length
        assert accept is not None and accept >= 3.0, accept
    finally:
        await backend.shutdown()
