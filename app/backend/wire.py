"""SGLang 0.5.23's OpenAI-compatible chat stream: the request body and an SSE line parser.

Pure functions and state, no I/O: `remote.py` does the HTTP. Source paths are relative
to the `sglang/srt/` package of the 0.5.23 wheel.

Wire format of one streamed reply (`entrypoints/openai/serving_chat.py`, `_generate_chat_stream`):

    data: {"id": RID, "object": "chat.completion.chunk", ..., "choices": [{"index": 0,
           "delta": {"reasoning_content": null, "role": "assistant", "content": ""},
           "logprobs": null, "finish_reason": null, "matched_stop": null}]}
    data: {... "delta": {"reasoning_content": "Let me"} ..., "usage": {...}}   reasoning
    data: {... "delta": {"reasoning_content": null, "content": "Hi"} ..., "usage": {...}}
    data: {... "delta": {"reasoning_content": null}, "finish_reason": "stop", ...}
    data: {... "choices": [], "sglext": {"spec_tokens_details": {...}}}   :2735-2764
    data: {... "choices": [], "usage": {...}}                            :2767-2797
    data: [DONE]                                                         :2805

Chunk shapes: `entrypoints/openai/sse_utils.py:13-99` (content chunks) and
`entrypoints/openai/protocol.py:1388-1402` (`ChatCompletionStreamResponse`, the sglext
and usage chunks). A failure after the stream started is `data: {"error": {...}}`
(`serving_chat.py:2566-2579, 2799-2803`; shape `serving_base.py:223-237`).
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.backend.protocol import ReplyDone, ReplyError, ReplyEvent, TextChunk
from app.backend.sglang_meta import (
    SGLANG_ACCEPT_HISTOGRAM,
    SGLANG_CORRECT_DRAFTS,
    SGLANG_PROPOSED_DRAFTS,
    SGLANG_VERIFY_ROUNDS,
)
from app.core.chat import ChatMessage, Sampling
from app.core.reply_usage import (
    ReplyUsage,
    check_count,
    count_in,
    histogram_in,
    optional_count_in,
)

_FINISH_REASONS = {"stop": "stop", "length": "length", "abort": "abort", "tool_calls": "stop"}
"""Chat finish reasons (`protocol.py:1373-1377`) as the protocol's three; others read as stop."""


_LINE_END = re.compile(r"\r\n|\r|\n")
_JSON_NESTING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]')
"""A JSON string (skipped whole) or a bracket. Possessive: a group repeated once a character
would keep a backtracking state each time, some 120 bytes a character of a long string."""

MAX_JSON_DEPTH = 64
"""The deepest JSON nesting any SGLang answer is read with (server info nests about 4 deep)."""
MAX_EVENT_LINE = 1 << 20
"""The longest event-stream line, in characters (a chunk of a few tokens is under 1 KB)."""


class WireError(ValueError):
    """An answer that is not what SGLang sends: broken, too deep or too long."""


class TooDeep(WireError):
    """JSON nested past the limit: refused before parsing."""


def parse_json(text: str | bytes, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`text` parsed as JSON, refused past `max_depth` levels of nesting before parsing.

    Raises:
        TooDeep: `what` nests deeper than `max_depth`.
        WireError: `what` is not JSON.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    depth = 0
    for match in _JSON_NESTING.finditer(text):
        bracket = match.group()
        if bracket in "[{":
            depth += 1
            if depth > max_depth:
                raise TooDeep(f"{what} nests deeper than {max_depth} levels")
        elif bracket in "]}":
            depth -= 1
    try:
        return json.loads(text)
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise WireError(f"invalid JSON in {what} ({reason}): {text[:80]!r}") from None


class SSELines:
    """Split a UTF-8 byte stream into event-stream lines, ended by CRLF, LF or CR only.

    Not httpx's `aiter_lines`: it splits like `str.splitlines`, also at U+0085, U+2028
    and U+2029, which JSON strings may hold unescaped (SGLang writes raw UTF-8), so
    model text holding one would cut a `data:` line in two.
    """

    def __init__(self, max_line: int = MAX_EVENT_LINE) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending: list[str] = []
        """The start of a line not yet ended, in pieces (joined once, when it ends)."""
        self._pending_chars = 0
        self._max_line = max_line

    def feed(self, data: bytes) -> list[str]:
        """The lines completed by `data`; a trailing CR waits for a possible LF.

        Raises:
            WireError: a line grew past `max_line` characters.
        """
        text = self._decoder.decode(data)
        if not _LINE_END.search(text):  # a long line goes on: no copy of what came before
            self._pending.append(text)
            self._pending_chars += len(text)
            self._check(self._pending_chars)
            return []
        text = "".join(self._pending) + text
        held = "\r" if text.endswith("\r") else ""
        *lines, rest = _LINE_END.split(text[: len(text) - len(held)])
        self._pending, self._pending_chars = [rest + held], len(rest) + len(held)
        self._check(max([self._pending_chars, *map(len, lines)]))
        return lines

    def _check(self, chars: int) -> None:
        if chars > self._max_line:
            raise WireError(f"an event line is longer than {self._max_line:,} characters")


def chat_messages(messages: Sequence[ChatMessage]) -> list[dict[str, str]]:
    """Messages as SGLang's OpenAI-compatible endpoints take them."""
    return [{"role": str(m.role), "content": m.content} for m in messages]


def tokenize_request(messages: Sequence[ChatMessage]) -> dict[str, Any]:
    """The `/v1/tokenize` body that renders and counts a prompt as a chat completion would.

    `TokenizeRequest` and `TokenizeResponse` (`entrypoints/openai/protocol.py:1744-1801`):
    with `messages` and no `add_generation_prompt`, the messages are rendered as for a
    chat completion; the answer holds `count` and the context size `max_model_len`.
    """
    return {"messages": chat_messages(messages)}


def prompt_size(body: Any) -> tuple[int, int]:
    """(prompt tokens, context size) from a `/v1/tokenize` answer.

    Raises:
        WireError: the answer is not a tokenize response.
    """
    if not (isinstance(body, dict) and "count" in body and "max_model_len" in body):
        raise WireError(f"not a tokenize response: {str(body)[:80]}")
    try:
        return check_count(body["count"], "count"), check_count(
            body["max_model_len"], "max_model_len"
        )
    except ValueError as exc:
        raise WireError(f"impossible tokenize response: {exc}") from None


def chat_request(
    messages: Sequence[ChatMessage],
    sampling: Sampling,
    *,
    model: str,
    rid: str,
    max_tokens: int | None,
    enable_thinking: bool = True,
    prefix: str | None = None,
    stop: str | None = None,
) -> dict[str, Any]:
    """The `/v1/chat/completions` body for one streamed reply.

    `ChatCompletionRequest` fields (`entrypoints/openai/protocol.py:909-1050`):
    `return_spec_tokens_details` adds the final `sglext.spec_tokens_details` chunk,
    `continuous_usage_stats` puts the cumulative `usage` on every text chunk
    (`serving_chat.py:984-991, 1034-1041`), and `rid` becomes the request id that
    `/abort_request` takes (`serving_chat.py:1395`; kept as given, `managers/io_struct.py:563`).
    The reply comes as raw text (`separate_reasoning` off: ling-chat splits the thinking,
    app/backend/thinking.py); `enable_thinking` goes to the chat template; `prefix`, the
    reply so far, follows the generation prompt as raw text (`continue_final_message`,
    `serving_chat.py:515-549`); `max_tokens` None: up to the end of the context.
    """
    turns = chat_messages(messages)
    if prefix is not None:
        turns.append({"role": "assistant", "content": prefix})
    body: dict[str, Any] = {
        "model": model,
        "messages": turns,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "return_spec_tokens_details": True,
        "separate_reasoning": False,
        "chat_template_kwargs": {"enable_thinking": enable_thinking},
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "rid": rid,
    }
    if max_tokens is not None:
        body["max_completion_tokens"] = max_tokens
    if prefix is not None:
        body["continue_final_message"] = True
    if stop is not None:
        body["stop"] = [stop]
    return body


@dataclass(slots=True)
class ChatStream:
    """The state of one streamed reply: feed it SSE lines, get `ReplyEvent`s back."""

    completion_tokens: int = 0
    ended: bool = False
    """True once `[DONE]` or an error event arrived: read no further."""
    _finish: str | None = None
    """The chat finish reason, once a choice carried one."""
    matched_stop: str | int | None = None
    """The stop string or token the reply ended on, when a choice named one."""
    _usage: dict[str, Any] = field(default_factory=dict)
    _spec: dict[str, Any] = field(default_factory=dict)

    def feed(self, line: str, at: float) -> list[ReplyEvent]:
        """Parse one line (without its newline) that arrived at `at`.

        Raises:
            WireError: the line is not valid SSE from SGLang, or its JSON is broken.
        """
        if not line or line.startswith(":"):
            return []
        field_name, sep, value = line.partition(":")
        if field_name in ("event", "id", "retry"):
            return []  # `event: sglext_ids` framing (serving_chat.py:2735-2755)
        if field_name != "data" or not sep:
            raise WireError(f"not an event-stream line: {line[:80]!r}")
        payload = value.removeprefix(" ")
        if payload == "[DONE]":
            return [self._done(at)]
        chunk = parse_json(payload, "an event")
        if not isinstance(chunk, dict):
            raise WireError(f"an event is not a JSON object: {payload[:80]!r}")
        return self._chunk(chunk, at)

    def aborted(self, at: float) -> ReplyDone:
        """The end of a reply the client stopped before the server finished it."""
        self._finish = "abort"
        try:
            usage = self.usage()
        except WireError:  # the stop wins: the tokens counted so far are checked already
            usage = ReplyUsage(completion_tokens=self.completion_tokens)
        return ReplyDone("abort", usage, at)

    def usage(self) -> ReplyUsage:
        """What arrived so far: the `usage` and `sglext.spec_tokens_details` chunks; every
        count they hold must be one (`check_count`), a count left out is 0 (or unknown)."""
        details = self._usage.get("prompt_tokens_details")
        try:
            return ReplyUsage(
                completion_tokens=self.completion_tokens,
                prompt_tokens=count_in(self._usage, "prompt_tokens"),
                cached_tokens=(
                    optional_count_in(details, "cached_tokens")
                    if isinstance(details, dict)
                    else None
                ),
                verify_rounds=count_in(self._spec, SGLANG_VERIFY_ROUNDS, "verify_rounds"),
                correct_drafts=count_in(self._spec, SGLANG_CORRECT_DRAFTS, "correct_drafts"),
                proposed_drafts=count_in(self._spec, SGLANG_PROPOSED_DRAFTS, "proposed_drafts"),
                accept_histogram=histogram_in(self._spec, SGLANG_ACCEPT_HISTOGRAM),
            )
        except ValueError as exc:
            raise WireError(f"impossible usage: {exc}") from None

    def _done(self, at: float) -> ReplyEvent:
        usage = self.usage()  # an impossible count raises before the stream counts as ended
        self.ended = True
        if self._finish is None:
            return ReplyError("the reply stream ended without a finish reason", at)
        return ReplyDone(_FINISH_REASONS.get(self._finish, "stop"), usage, at)

    def _chunk(self, chunk: Mapping[str, Any], at: float) -> list[ReplyEvent]:
        error = chunk.get("error")
        if error is not None:
            self.ended = True
            message = error.get("message") if isinstance(error, dict) else error
            return [ReplyError(f"the server reported an error: {message}", at)]
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
            if usage.get("completion_tokens") is not None:
                try:
                    self.completion_tokens = check_count(
                        usage["completion_tokens"], "completion_tokens"
                    )
                except ValueError as exc:
                    raise WireError(f"impossible usage: {exc}") from None
        sglext = chunk.get("sglext")
        if isinstance(sglext, dict) and isinstance(sglext.get("spec_tokens_details"), dict):
            self._spec = sglext["spec_tokens_details"]
        choices = chunk.get("choices", [])
        if not isinstance(choices, list):
            raise WireError(f"'choices' is not a list: {choices!r:.80}")
        events: list[ReplyEvent] = []
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                raise WireError(f"a choice without a delta: {choice!r:.80}")
            reasoning = delta.get("reasoning_content") or ""
            answer = delta.get("content") or ""
            if reasoning or answer:
                events.append(TextChunk(str(answer), str(reasoning), self.completion_tokens, at))
            if choice.get("finish_reason"):
                self._finish = str(choice["finish_reason"])
                matched = choice.get("matched_stop")
                self.matched_stop = matched if isinstance(matched, str | int) else None
        return events
