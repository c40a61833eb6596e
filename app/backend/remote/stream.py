"""One reply's stream from an SGLang server: `POST /v1/chat/completions`, read into events.

The server wait bounds the first token, then each next one (keepalives do not count); a
stream that ends without `[DONE]`, breaks, or passes a reply's bounds (its text, its event
lines, its bytes) ends the reply with a one-line `ReplyError`, its text so far kept.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from app.backend.protocol import ReplyError, ReplyEvent, TextChunk
from app.backend.remote.http import ServerHttp
from app.backend.wire import ChatStream, SSELines, WireError
from app.core.chat import MAX_TEXT_CHARS
from app.core.errors import BadServerAnswer

STREAM_TIMEOUT = httpx.Timeout(30.0, connect=5.0, read=None)
"""For replies: headers arrive only after the first token (`serving_chat.py:2422-2428`);
reading is bounded by the server wait instead: the first token, then each next one."""
MAX_REPLY_CHARS: Final = MAX_TEXT_CHARS
"""The most text (answer and reasoning together) one reply may bring: a message's limit,
so that the stored reply still exports and imports (131,072 tokens, the longest budget, is
about 524,288 characters)."""
MAX_REPLY_EVENTS: Final = 1 << 18
"""The most event-stream lines (keepalives included) one reply may take: 262,144, two for
each token of the longest budget (SGLang sends at most one a decode step)."""
MAX_REPLY_BYTES: Final = 128 << 20
"""The most bytes one reply's stream may take: 128 MiB, about twice the longest budget
sent a token a chunk with its usage (some 450 bytes each)."""


@dataclass(slots=True, eq=False)
class RemoteReply:
    """One reply in flight: its request id and the task reading its stream."""

    rid: str
    events: asyncio.Queue[ReplyEvent | None] = field(default_factory=asyncio.Queue)
    """The reply's events, then None once the reading task ended."""
    stopping: bool = False
    task: asyncio.Task[None] | None = None
    stream: ChatStream = field(default_factory=ChatStream)
    """The reply's parsed stream (its finish, the stop it matched)."""


@dataclass(slots=True)
class ReplyBounds:
    """What one reply's stream took so far; each method says, in words that follow the
    server's name, which bound a step passed (None while within them)."""

    taken_bytes: int = 0
    lines: int = 0
    chars: int = 0

    def bytes(self, count: int) -> str | None:
        self.taken_bytes += count
        if self.taken_bytes > MAX_REPLY_BYTES:
            return f"sent more than {MAX_REPLY_BYTES >> 20} MiB for one reply: {_NOT_A_REPLY}"
        return None

    def line(self) -> str | None:
        self.lines += 1
        if self.lines > MAX_REPLY_EVENTS:
            return f"sent more than {MAX_REPLY_EVENTS:,} event lines for one reply: {_NOT_A_REPLY}"
        return None

    def text(self, event: ReplyEvent) -> str | None:
        if isinstance(event, TextChunk):
            self.chars += len(event.answer) + len(event.reasoning)
        if self.chars > MAX_REPLY_CHARS:
            return (
                f"sent more than {MAX_REPLY_CHARS:,} characters of text for one reply (a "
                f"message's limit): {_NOT_A_REPLY}"
            )
        return None


_NOT_A_REPLY = "not an SGLang reply, read no further"


async def read_reply(http: ServerHttp, reply: RemoteReply, body: Mapping[str, Any]) -> None:
    """Read the reply into `reply.events`; the last event put is a Done or an Error."""
    stream = reply.stream
    try:
        failure = await _read_stream(http, reply, stream, body)
    except asyncio.CancelledError:
        if reply.stopping:
            reply.events.put_nowait(stream.aborted(time.perf_counter()))
        raise
    if stream.ended:
        return
    if reply.stopping:  # the abort cut the stream off
        reply.events.put_nowait(stream.aborted(time.perf_counter()))
        return
    failure = failure or (
        f"the reply stream from {http.base_url} ended early (no [DONE]): the server may have died"
    )
    reply.events.put_nowait(ReplyError(failure, time.perf_counter()))


async def _read_stream(
    http: ServerHttp, reply: RemoteReply, stream: ChatStream, body: Mapping[str, Any]
) -> str | None:
    """Put the stream's events; returns a one-line failure, or None once the body ended."""
    what = "POST /v1/chat/completions"
    awaited = "the reply's first token"
    try:
        async with (
            asyncio.timeout(http.wait_s) as deadline,
            http.client.stream(
                "POST",
                http.url("/v1/chat/completions"),
                json=body,
                headers=http.headers,
                timeout=STREAM_TIMEOUT,
            ) as response,
        ):
            if response.status_code != 200:
                return http.status_message(await http.error_answer(response, what), what)
            kind = response.headers.get("content-type", "no content type").split(";")[0].strip()
            if kind != "text/event-stream":  # SGLang's (serving_chat.py:2437)
                return (
                    f"{http.base_url} answered {what} with {kind}, not an event stream: not an "
                    "SGLang chat endpoint (a web page or a proxy at that address?)"
                )
            lines = SSELines()
            taken = ReplyBounds()
            async for data in response.aiter_bytes():
                at = time.perf_counter()
                if past := taken.bytes(len(data)):
                    return f"{http.base_url} {past}"
                for line in lines.feed(data):
                    if past := taken.line():
                        return f"{http.base_url} {past}"
                    for event in stream.feed(line, at):
                        if past := taken.text(event):
                            return f"{http.base_url} {past}"
                        reply.events.put_nowait(event)
                        # Only text or the end counts: keepalives do not hold the wait.
                        awaited = "the reply's next token"
                        deadline.reschedule(asyncio.get_running_loop().time() + http.wait_s)
                    if stream.ended:
                        return None
    except TimeoutError:
        return http.overdue(awaited)
    except WireError as exc:
        return f"{http.base_url} sent a broken reply stream: {exc}"
    except BadServerAnswer as exc:
        return str(exc)
    except httpx.HTTPError as exc:
        return http.transport_message(exc, what, STREAM_TIMEOUT)
    return None
