"""One reply's stream from an SGLang server: `POST /v1/chat/completions`, read into events.

The server wait bounds the first token, then each next one (keepalives do not count); a
stream that ends without `[DONE]` or breaks ends the reply with a one-line `ReplyError`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from app.backend.protocol import ReplyError, ReplyEvent
from app.backend.remote.http import ServerHttp
from app.backend.wire import ChatStream, SSELines, WireError
from app.core.errors import BadServerAnswer

STREAM_TIMEOUT = httpx.Timeout(30.0, connect=5.0, read=None)
"""For replies: headers arrive only after the first token (`serving_chat.py:2422-2428`);
reading is bounded by the server wait instead: the first token, then each next one."""


@dataclass(slots=True, eq=False)
class RemoteReply:
    """One reply in flight: its request id and the task reading its stream."""

    rid: str
    events: asyncio.Queue[ReplyEvent | None] = field(default_factory=asyncio.Queue)
    """The reply's events, then None once the reading task ended."""
    stopping: bool = False
    task: asyncio.Task[None] | None = None


async def read_reply(http: ServerHttp, reply: RemoteReply, body: Mapping[str, Any]) -> None:
    """Read the reply into `reply.events`; the last event put is a Done or an Error."""
    stream = ChatStream()
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
            lines = SSELines()
            async for data in response.aiter_bytes():
                at = time.perf_counter()
                for line in lines.feed(data):
                    for event in stream.feed(line, at):
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
