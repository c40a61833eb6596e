"""The in-process engine's thinking budget (app/backend/engine/phases.py, reply.py): the
thinking stops at its budget, `</think>` is appended and the answer follows in a request of
its own with its own budget; thinking off, continuing a thinking or an answer.

SGLang's engine is replaced by `WalkingEngineDouble` (the user never sees it): a model that
walks a known cycle like tests/gpu/models.py's, two tokens a verify round, honouring
`max_new_tokens`, `stop_token_ids` and aborts as SGLang 0.5.23 does. The engine thread,
loop, queue and every line of ling-chat's are the real ones.
"""

from __future__ import annotations

import asyncio
import re
import sys
import types
from typing import Any

import pytest

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.backend.engine.thread import EngineThread
from app.backend.protocol import ReplyDone, ReplyError, TextChunk
from app.core.chat import ChatMessage, PartialReply, Role, Sampling, Thinking
from tests.fixtures.engine_double.sglang.srt.parser import reasoning_parser as ling3_double

REASONING = [f" r{i}" for i in range(12)]
ANSWER = [f" a{i}" for i in range(8)]
SPECIAL = ["<user>", "<assistant>", "<think>", "</think>", "<eos>"]
VOCAB = [*SPECIAL, *REASONING, *ANSWER, "?"]
IDS = {token: i for i, token in enumerate(VOCAB)}
WALK = ["<think>", *REASONING, "</think>", *ANSWER, "<eos>"]
NEXT = {IDS[a]: IDS[b] for a, b in zip(WALK, WALK[1:], strict=False)}
TOKEN = re.compile("|".join(re.escape(t) for t in sorted(VOCAB[:-1], key=len, reverse=True)))
QUESTION = [ChatMessage(Role.USER, "why")]


class WalkingTokenizerDouble:
    """Tags for the chat template (thinking off closes the thinking at once); the vocabulary's
    tokens, anything else one `?` a character."""

    def apply_chat_template(self, turns: list[dict[str, str]], **kwargs: Any) -> str:
        prompt = "".join(f"<{t['role']}>{t['content']}" for t in turns) + "<assistant><think>"
        return prompt + ("</think>" if kwargs.get("enable_thinking") is False else "")

    def __call__(self, texts: list[str], **_: Any) -> dict[str, list[list[int]]]:
        return {"input_ids": [self.encode(text) for text in texts]}

    @staticmethod
    def encode(text: str) -> list[int]:
        ids, at = [], 0
        for match in TOKEN.finditer(text):
            ids += [IDS["?"]] * (match.start() - at) + [IDS[match.group()]]
            at = match.end()
        return ids + [IDS["?"]] * (len(text) - at)


class WalkingEngineDouble:
    """Streams the walk after the prompt's last token like `Engine.async_generate`:
    cumulative text and output ids, two tokens a chunk, SGLang's finish reasons (a matched
    stop token is in the output ids, not in the text), speculative counts at the end."""

    def __init__(self, context_len: int = 100_000, chunk_s: float = 0.0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.aborted: list[str] = []
        self.chunk_s = chunk_s
        self.tokenizer_manager = types.SimpleNamespace(
            tokenizer=WalkingTokenizerDouble(),
            abort_request=self.aborted.append,
            context_len=context_len,
            num_reserved_tokens=0,
        )

    async def async_generate(
        self, *, input_ids: list[int], sampling_params: dict[str, Any], stream: bool, rid: str
    ):
        self.requests.append({"input_ids": list(input_ids), "rid": rid, **sampling_params})
        stops = set(sampling_params.get("stop_token_ids", ()))
        budget = sampling_params["max_new_tokens"]

        async def chunks():
            ids: list[int] = []
            text, last, finish = "", input_ids[-1], None
            while finish is None:
                await asyncio.sleep(self.chunk_s)
                if rid in self.aborted:
                    meta = {"completion_tokens": len(ids), "finish_reason": {"type": "abort"}}
                    yield {"text": text, "output_ids": list(ids), "meta_info": meta}
                    return
                for _ in range(2):
                    last = NEXT.get(last, IDS["<eos>"])
                    ids.append(last)
                    if last in stops or last == IDS["<eos>"]:
                        finish = {"type": "stop", "matched": last}
                    elif len(ids) == budget:
                        finish = {"type": "length", "length": budget}
                    if finish is not None:
                        break
                text = "".join(VOCAB[i] for i in ids if VOCAB[i] not in ("<eos>",))
                if finish and finish.get("matched") in stops:
                    text = text.removesuffix("</think>")
                meta = {"completion_tokens": len(ids), "finish_reason": finish}
                if finish is not None:
                    meta["spec_verify_ct"] = (len(ids) + 1) // 2
                yield {"text": text, "output_ids": list(ids), "meta_info": meta}

        return chunks()


def running(engine: WalkingEngineDouble, tmp_path) -> EngineBackend:
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    backend._engine, backend._thread = engine, EngineThread()
    return backend


async def reply(backend: EngineBackend, sampling: Sampling, **kwargs: Any):
    events = [e async for e in backend.stream_reply(QUESTION, sampling, **kwargs)]
    await backend.shutdown()
    chunks = [e for e in events if isinstance(e, TextChunk)]
    reasoning = "".join(c.reasoning for c in chunks)
    answer = "".join(c.answer for c in chunks)
    return reasoning, answer, chunks, events[-1]


async def test_a_thinking_budget_cuts_the_thinking_there_and_the_answer_keeps_its_own(tmp_path):
    engine = WalkingEngineDouble()
    sampling = Sampling(max_new_tokens=len(ANSWER) + 1)  # the answer and its end, no more
    reasoning, answer, chunks, done = await reply(
        running(engine, tmp_path), sampling, thinking=Thinking(budget=5)
    )
    assert reasoning == "".join(REASONING[:5])
    assert answer == "".join(ANSWER)
    assert isinstance(done, ReplyDone) and done.finish_reason == "stop"
    first, second = engine.requests
    assert (first["max_new_tokens"], first["stop_token_ids"]) == (5, [IDS["</think>"]])
    thought = [IDS[t] for t in REASONING[:5]]
    assert second["input_ids"] == first["input_ids"] + thought + [IDS["</think>"]]
    assert second["max_new_tokens"] == len(ANSWER) + 1
    assert "stop_token_ids" not in second
    assert done.usage.completion_tokens == 5 + len(ANSWER) + 1
    assert done.usage.verify_rounds == 3 + 5  # both requests' rounds: accept over all of them
    assert [c.completion_tokens for c in chunks] == sorted(c.completion_tokens for c in chunks)
    assert chunks[-1].completion_tokens > 5  # counted on from the thinking's tokens


async def test_a_thinking_within_its_budget_ends_on_its_own_close_without_a_second_one(
    tmp_path,
):
    engine = WalkingEngineDouble()
    reasoning, answer, _, done = await reply(
        running(engine, tmp_path), Sampling(), thinking=Thinking(budget=100)
    )
    assert (reasoning, answer) == ("".join(REASONING), "".join(ANSWER))
    first, second = engine.requests
    assert first["max_new_tokens"] == 100
    walked = [IDS[t] for t in REASONING] + [IDS["</think>"]]
    assert second["input_ids"] == first["input_ids"] + walked  # `</think>` once
    assert second["max_new_tokens"] == Sampling().max_new_tokens
    assert isinstance(done, ReplyDone) and done.usage.completion_tokens == len(WALK) - 1


@pytest.fixture
def ling3_parser(monkeypatch):
    """SGLang 0.5.23's `ling3` reasoning parser (its double) for any code that imports it."""
    monkeypatch.setitem(sys.modules, "sglang.srt.parser.reasoning_parser", ling3_double)


@pytest.mark.parametrize("budget", [5, 100], ids=["cut-by-budget", "closed-by-stop"])
async def test_the_answer_follows_the_thinking_and_is_not_the_thinking_again(
    ling3_parser, budget, tmp_path
):
    # The GPU failures (tests/gpu/test_thinking_gpu.py, test_dspark_gpu.py): the first
    # request always ends inside the thinking (its budget, or `</think>` taken as the stop and
    # trimmed from the text); SGLang's ling3 parser then handed the thinking out again as the
    # answer, and no answer request followed. ling-chat splits the raw text itself.
    engine = WalkingEngineDouble()
    reasoning, answer, _, done = await reply(
        running(engine, tmp_path), Sampling(), thinking=Thinking(budget=budget)
    )
    assert reasoning == "".join(REASONING[:budget])
    assert answer == "".join(ANSWER)
    assert len(engine.requests) == 2
    assert engine.requests[1]["input_ids"][-1] == IDS["</think>"]
    assert isinstance(done, ReplyDone) and done.finish_reason == "stop"


def test_the_ling3_parser_double_hands_a_thinking_that_never_closed_out_as_the_answer():
    # As SGLang 0.5.23's `ReasoningParser("ling3", stream_reasoning=True,
    # force_reasoning=True)` does (the double matched it on every split of such streams).
    parser = ling3_double.ReasoningParser("ling3", stream_reasoning=True, force_reasoning=True)
    parts = [parser.parse_stream_chunk(d) for d in (" r0 r1", " r2</thi")]
    assert parts == [(" r0 r1", ""), (" r2", "")]
    assert parser.parse_stream_end() == ("", " r0 r1 r2</thi")
    closed = ling3_double.ReasoningParser("ling3", force_reasoning=True)
    assert closed.parse_stream_chunk("<think> r0</th") == (" r0", "")
    assert closed.parse_stream_chunk("ink> a0") == ("", " a0")
    assert closed.parse_stream_end() == ("", "")


async def test_thinking_off_is_one_request_of_the_answer_alone(tmp_path):
    engine = WalkingEngineDouble()
    reasoning, answer, _, done = await reply(
        running(engine, tmp_path), Sampling(max_new_tokens=50), thinking=Thinking(enabled=False)
    )
    assert (reasoning, answer) == ("", "".join(ANSWER))
    (request,) = engine.requests
    assert request["input_ids"][-2:] == [IDS["<think>"], IDS["</think>"]]
    assert request["max_new_tokens"] == 50 and "stop_token_ids" not in request
    assert isinstance(done, ReplyDone) and done.finish_reason == "stop" and not done.cut_by


async def test_an_answer_cut_by_its_budget_says_so(tmp_path):
    engine = WalkingEngineDouble()
    _, answer, _, done = await reply(
        running(engine, tmp_path), Sampling(max_new_tokens=3), thinking=Thinking(budget=64)
    )
    assert answer == "".join(ANSWER[:3])
    assert isinstance(done, ReplyDone) and done.finish_reason == "length"
    assert done.cut_by == "the reply budget of 3 tokens"


async def test_a_thinking_without_a_budget_is_cut_by_the_context_and_says_so(tmp_path):
    prompt = WalkingTokenizerDouble.encode("<user>why<assistant><think>")
    engine = WalkingEngineDouble(context_len=len(prompt) + 4)
    reasoning, answer, _, done = await reply(
        running(engine, tmp_path), Sampling(), thinking=Thinking(budget=None)
    )
    assert (reasoning, answer) == ("".join(REASONING[:4]), "")
    assert isinstance(done, ReplyDone) and done.finish_reason == "length"
    assert done.cut_by == "the room left in the model's context (4 tokens)"
    assert len(engine.requests) == 1


async def test_continuing_a_thinking_goes_on_from_its_text(tmp_path):
    engine = WalkingEngineDouble()
    partial = PartialReply(reasoning="".join(REASONING[:3]), answer="")
    reasoning, answer, chunks, done = await reply(
        running(engine, tmp_path), Sampling(), thinking=Thinking(budget=100), partial=partial
    )
    assert reasoning == "".join(REASONING[3:])  # only the new text
    assert answer == "".join(ANSWER)
    first = engine.requests[0]
    assert first["input_ids"][-4:] == [IDS["<think>"]] + [IDS[t] for t in REASONING[:3]]
    assert chunks[0].completion_tokens <= 2  # the counts are the continuation's own
    assert isinstance(done, ReplyDone)
    assert done.usage.completion_tokens == len(REASONING) - 3 + 1 + len(ANSWER) + 1


async def test_continuing_an_answer_is_one_request_after_the_thinking_closed(tmp_path):
    engine = WalkingEngineDouble()
    partial = PartialReply(reasoning="".join(REASONING), answer="".join(ANSWER[:2]))
    reasoning, answer, _, done = await reply(
        running(engine, tmp_path), Sampling(), thinking=Thinking(budget=5), partial=partial
    )
    assert (reasoning, answer) == ("", "".join(ANSWER[2:]))
    (request,) = engine.requests
    closed = [IDS["</think>"], IDS[ANSWER[0]], IDS[ANSWER[1]]]
    assert request["input_ids"][-3:] == closed
    assert "stop_token_ids" not in request
    assert isinstance(done, ReplyDone) and done.finish_reason == "stop"


async def test_a_stop_during_the_thinking_asks_for_no_answer(tmp_path):
    engine = WalkingEngineDouble(chunk_s=0.05)
    backend = running(engine, tmp_path)
    events = []
    async for event in backend.stream_reply(QUESTION, Sampling(), thinking=Thinking(budget=4)):
        events.append(event)
        if len(events) == 1:
            await backend.stop_reply()
    await backend.shutdown()
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.finish_reason == "abort"
    assert len(engine.requests) == 1
    assert set(engine.aborted) == {engine.requests[0]["rid"]}


async def test_a_stream_without_token_ids_cannot_be_forced_and_says_so(tmp_path):
    engine = WalkingEngineDouble()
    plain = engine.async_generate

    async def without_ids(**kwargs: Any):
        async def chunks():
            async for chunk in await plain(**kwargs):
                yield {key: value for key, value in chunk.items() if key != "output_ids"}

        return chunks()

    engine.async_generate = without_ids  # type: ignore[method-assign]
    _, _, _, error = await reply(running(engine, tmp_path), Sampling(), thinking=Thinking(budget=3))
    assert isinstance(error, ReplyError)
    assert "no token ids" in error.message and "\n" not in error.message
