"""One chat reply on the engine thread: the prompt, then SGLang's stream with reasoning split
from the answer, the thinking held to its budget (app.backend.engine.phases.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from app.backend.engine.config import chat_template_kwargs
from app.backend.engine.phases import Phase, ReplyPlan, next_phase
from app.backend.protocol import ReplyDone, ReplyError, ReplyEvent, TextChunk
from app.backend.sglang_meta import finish_type, usage_from_meta_info
from app.backend.thinking import END_THINK, ThinkingSplit, continued_text
from app.backend.wire import chat_messages
from app.core.chat import ChatMessage, PartialReply, Sampling, Thinking, fit_to_context
from app.core.reply_usage import ReplyUsage


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


def reply_plan(
    manager: Any,
    messages: Sequence[ChatMessage],
    sampling: Sampling,
    thinking: Thinking,
    partial: PartialReply | None = None,
) -> ReplyPlan:
    """The reply's prompt ids (tokenized once, here, as SGLang would) and budgets, from
    SGLang's tokenizer manager; `partial`: the reply to continue (its text follows the
    generation prompt as the model wrote it).

    Raises:
        ContextFull: the prompt leaves no room for a reply.
    """
    thinks = thinking.enabled if partial is None else partial.thinking_open
    enable = thinking.enabled or (partial is not None and bool(partial.reasoning))
    text = chat_prompt(manager.tokenizer, messages, enable_thinking=enable)
    if partial is not None:
        text += continued_text(partial)
    input_ids = list(manager.tokenizer([text])["input_ids"][0])
    end_think = list(manager.tokenizer([END_THINK], add_special_tokens=False)["input_ids"][0])
    context = int(manager.context_len)
    used = len(input_ids) + int(manager.num_reserved_tokens)
    fit_to_context(sampling, used, context)  # raises ContextFull when no room is left
    return ReplyPlan(
        input_ids=input_ids,
        thinks=thinks,
        thinking_budget=thinking.budget if thinks else None,
        answer_budget=sampling.max_new_tokens,
        room=context - used,
        end_think=end_think,
    )


class ReplyRun:
    """The request of a reply in flight (a reply may take two), and whether it was stopped.

    Both are read and written on the engine loop only."""

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.request = rid
        """The request running now: `rid`, then `rid-answer` for a forced answer."""
        self.stopped = False


async def produce_reply(
    engine: Any,
    plan: ReplyPlan,
    sampling: Sampling,
    run: ReplyRun,
    emit: Callable[[ReplyEvent], Any],
    failure: Callable[[Exception], str],
) -> None:
    """Runs on the engine loop: generate and emit events until the reply ends.

    Args:
        engine: SGLang's running Engine.
        emit: takes each event, the last one a `ReplyDone` or a `ReplyError`.
        failure: the one-line message for an exception the request raised.
    """
    phase: Phase | None = plan.first_phase()
    usage: ReplyUsage | None = None
    done_tokens = 0
    try:
        while phase is not None:
            params: dict[str, Any] = {
                **sampling.as_sglang(),
                "max_new_tokens": phase.max_new_tokens,
            }
            if phase.stop_token_ids:
                params["stop_token_ids"] = list(phase.stop_token_ids)
            run.request = f"{run.rid}-{phase.name}" if phase.name != "first" else run.rid
            stream = await engine.async_generate(
                input_ids=phase.input_ids, sampling_params=params, stream=True, rid=run.request
            )
            text, meta, answered = "", {}, False
            split = ThinkingSplit() if phase.thinking else None
            output_ids: list[int] = []
            async for chunk in stream:
                now = time.perf_counter()
                meta = chunk.get("meta_info", {})
                tokens = done_tokens + int(meta.get("completion_tokens", 0))
                delta, text = chunk.get("text", "")[len(text) :], chunk.get("text", "")
                output_ids = chunk.get("output_ids") or output_ids
                finish = meta.get("finish_reason")
                parts = [split.feed(delta) if split else ("", delta)]
                if finish is not None and split:
                    parts.append(split.end())
                for reasoning, answer in parts:
                    answered = answered or bool(answer)
                    if reasoning or answer:
                        emit(TextChunk(answer, reasoning, tokens, now))
                if finish is not None:
                    break
            else:
                emit(ReplyError("the engine ended the stream without a finish reason", now_()))
                return
            part = usage_from_meta_info(meta)
            usage = part if usage is None else usage.then(part)
            done_tokens = usage.completion_tokens
            reason = finish_type(meta) or "stop"
            ids, phase_done = list(output_ids), phase
            phase = None if run.stopped else next_phase(plan, phase, meta, ids, answered)
            if phase is None:
                cut_by = phase_done.limit if reason == "length" else ""
                emit(ReplyDone(reason, usage, time.perf_counter(), cut_by))
                return
    except Exception as exc:
        emit(ReplyError(failure(exc), now_()))


def now_() -> float:
    """perf_counter(), the clock of every event."""
    return time.perf_counter()
