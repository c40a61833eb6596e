"""A server's reply with a thinking budget (app/backend/remote/phases.py): the thinking
request stops at `</think>` or its budget, the answer continues the reply so far
(`continue_final_message`) with its own budget; thinking off; continuing a reply.

The server is `WalkingServerDouble` (a test double of SGLang 0.5.23's chat endpoint behind
`httpx.MockTransport`): raw text when `separate_reasoning` is off, `stop`,
`max_completion_tokens`, `continue_final_message` and `chat_template_kwargs` honoured as
SGLang does, a token a chunk.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.backend.protocol import ReplyDone, TextChunk
from app.backend.remote.remote import RemoteBackend
from app.core.chat import ChatMessage, PartialReply, Role, Sampling, Thinking

REASONING = [f"r{i} " for i in range(12)]
ANSWER = [f"a{i} " for i in range(8)]
QUESTION = (ChatMessage(Role.USER, "why"),)


class WalkingServerDouble:
    """Walks REASONING, `</think>`, ANSWER from where the request's prompt leaves off."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if request.url.path == "/v1/tokenize":
            count = sum(len(m["content"]) for m in body["messages"])
            return httpx.Response(200, json={"count": count, "max_model_len": 100_000})
        if request.url.path != "/v1/chat/completions":
            return httpx.Response(404, json={"detail": "Not Found"})
        self.bodies.append(body)
        assert body["separate_reasoning"] is False
        walk = [*REASONING, "</think>", *ANSWER]
        prefix = body["messages"][-1]["content"] if body.get("continue_final_message") else ""
        thought, closed, answered = prefix.partition("</think>")
        start = len(REASONING) + 1 + len(answered.split()) if closed else len(thought.split())
        if not body["chat_template_kwargs"]["enable_thinking"] and not prefix:
            start = len(REASONING) + 1  # the template closed the thinking
        budget, stops = body.get("max_completion_tokens", 10**6), body.get("stop") or []
        lines, tokens, finish, matched = [], 0, "stop", None
        for token in walk[start:]:
            tokens += 1
            if token in stops:
                matched = token
                break
            lines.append(self.chunk({"content": token}, None, tokens))
            if tokens == budget:
                finish = "length"
                break
        else:
            tokens += 1  # the end of text
        lines.append(self.chunk({}, finish, tokens, matched))
        lines.append({"choices": [], "sglext": {"spec_tokens_details": {"spec_verify_ct": 1}}})
        data = b"".join(b"data: " + json.dumps(line).encode() + b"\n\n" for line in lines)
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, content=data + b"data: [DONE]\n\n")

    @staticmethod
    def chunk(delta: dict[str, str], finish: str | None, tokens: int, matched: Any = None):
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "matched_stop": matched}
        return {"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": tokens}}


@pytest.fixture
async def server() -> AsyncIterator[tuple[WalkingServerDouble, RemoteBackend]]:
    double = WalkingServerDouble()
    async with httpx.AsyncClient(transport=httpx.MockTransport(double)) as client:
        yield double, RemoteBackend("http://sglang.test:30000", client=client)


async def reply(backend: RemoteBackend, sampling: Sampling, **kwargs: Any):
    events = [e async for e in backend.stream_reply(QUESTION, sampling, **kwargs)]
    chunks = [e for e in events if isinstance(e, TextChunk)]
    done = events[-1]
    assert isinstance(done, ReplyDone), done
    return "".join(c.reasoning for c in chunks), "".join(c.answer for c in chunks), done


async def test_a_thinking_budget_cuts_the_thinking_and_the_answer_continues_after_it(server):
    double, backend = server
    sampling = Sampling(max_new_tokens=len(ANSWER) + 1)
    reasoning, answer, done = await reply(backend, sampling, thinking=Thinking(budget=4))
    assert (reasoning, answer) == ("".join(REASONING[:4]), "".join(ANSWER))
    first, second = double.bodies
    assert (first["max_completion_tokens"], first["stop"]) == (4, ["</think>"])
    assert second["continue_final_message"] is True and "stop" not in second
    assert second["messages"][-1] == {
        "role": "assistant",
        "content": "".join(REASONING[:4]) + "</think>",
    }
    assert second["max_completion_tokens"] == len(ANSWER) + 1
    assert done.finish_reason == "stop"
    assert done.usage.completion_tokens == 4 + len(ANSWER) + 1
    assert done.usage.verify_rounds == 2  # each request's rounds, summed


async def test_a_thinking_that_closes_itself_is_answered_in_a_second_request(server):
    double, backend = server
    reasoning, answer, done = await reply(backend, Sampling(), thinking=Thinking(budget=100))
    assert (reasoning, answer) == ("".join(REASONING), "".join(ANSWER))
    assert double.bodies[1]["messages"][-1]["content"] == "".join(REASONING) + "</think>"
    assert done.finish_reason == "stop"


async def test_thinking_off_asks_the_template_for_none_and_gets_the_answer(server):
    double, backend = server
    sampling = Sampling(max_new_tokens=3)
    reasoning, answer, done = await reply(backend, sampling, thinking=Thinking(enabled=False))
    assert (reasoning, answer) == ("", "".join(ANSWER[:3]))
    (body,) = double.bodies
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "stop" not in body and "continue_final_message" not in body
    assert (done.finish_reason, done.cut_by) == ("length", "the reply budget of 3 tokens")


async def test_a_cut_answer_continues_from_its_text(server):
    double, backend = server
    partial = PartialReply("".join(REASONING), "".join(ANSWER[:5]))
    reasoning, answer, done = await reply(backend, Sampling(), partial=partial)
    assert (reasoning, answer) == ("", "".join(ANSWER[5:]))
    (body,) = double.bodies
    assert body["continue_final_message"] is True
    assert body["messages"][-1]["content"] == partial.reasoning + "</think>" + partial.answer
    assert done.usage.completion_tokens == 3 + 1  # the new tokens only
