"""One chat reply on the engine thread: the prompt, then SGLang's stream with reasoning split
from the answer."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from app.backend.engine.config import REASONING_PARSER, chat_template_kwargs
from app.backend.protocol import ReplyDone, ReplyError, ReplyEvent, TextChunk
from app.backend.sglang_meta import finish_type, usage_from_meta_info
from app.backend.wire import chat_messages
from app.core.chat import ChatMessage


def chat_prompt(tokenizer: Any, messages: Sequence[ChatMessage], **template: Any) -> str:
    """The prompt text from the model's own chat template (`template`: its arguments)."""
    return str(
        tokenizer.apply_chat_template(
            chat_messages(messages),
            tokenize=False,
            add_generation_prompt=True,
            **{**chat_template_kwargs(), **template},
        )
    )


def prompt_ids(manager: Any, messages: Sequence[ChatMessage]) -> tuple[list[int], int]:
    """The prompt's token ids (tokenized once, here, as SGLang would) and the context size,
    from SGLang's tokenizer manager."""
    input_ids = manager.tokenizer([chat_prompt(manager.tokenizer, messages)])["input_ids"][0]
    return list(input_ids), int(manager.context_len)


async def produce_reply(
    engine: Any,
    input_ids: list[int],
    sampling_params: dict[str, Any],
    rid: str,
    emit: Callable[[ReplyEvent], Any],
    failure: Callable[[Exception], str],
) -> None:
    """Runs on the engine loop: generate and emit events until the reply ends.

    Args:
        engine: SGLang's running Engine.
        emit: takes each event, the last one a `ReplyDone` or a `ReplyError`.
        failure: the one-line message for an exception the request raised.
    """
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    parser = ReasoningParser(REASONING_PARSER.value, stream_reasoning=True, force_reasoning=True)
    text = ""
    try:
        stream = await engine.async_generate(
            input_ids=input_ids, sampling_params=sampling_params, stream=True, rid=rid
        )
        async for chunk in stream:
            now = time.perf_counter()
            meta = chunk.get("meta_info", {})
            tokens = int(meta.get("completion_tokens", 0))
            delta, text = chunk.get("text", "")[len(text) :], chunk.get("text", "")
            parts = [parser.parse_stream_chunk(delta)] if delta else []
            finish = meta.get("finish_reason")
            if finish is not None:
                parts.append(parser.parse_stream_end())
            for reasoning, answer in parts:
                if reasoning or answer:
                    emit(TextChunk(answer or "", reasoning or "", tokens, now))
            if finish is not None:
                emit(ReplyDone(finish_type(meta) or "stop", usage_from_meta_info(meta), now))
                return
        emit(ReplyError("the engine ended the stream without a finish reason", time.perf_counter()))
    except Exception as exc:
        emit(ReplyError(failure(exc), time.perf_counter()))
