"""RemoteBackend against hostile servers on real sockets: every answer has a size and a depth.

Each server is a real HTTP server on 127.0.0.1 whose endless answers are bounded loops:
they stop after `SENT_AT_MOST` bytes or once the client hung up.
"""

from __future__ import annotations

import json
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from app.backend.protocol import ReplyError
from app.backend.remote.remote import RemoteBackend
from app.backend.remote.stream import MAX_REPLY_BYTES, MAX_REPLY_CHARS, MAX_REPLY_EVENTS
from app.backend.wire import MAX_EVENT_LINE
from app.core.chat import ChatMessage, Role, Sampling, Thinking
from app.core.errors import BadServerAnswer, LingChatError
from app.storage import ChatStore, MessageStatus
from app.ui.reply import ReplyRequest, ReplyRun

SENT_AT_MOST = 256 << 20
"""An endless answer's bound: far past every limit, and what the old client read whole."""
PIECE = 64 << 10
HELLO = (ChatMessage(Role.USER, "Hi"),)
NO_THINKING = Thinking(enabled=False)
"""The canned streams here are answers: their requests ask for no thinking."""
SERVER_INFO = b'{"version": "0.5.23", "model_path": "m"}'
EVENTS = "text/event-stream"

Send = Callable[[BaseHTTPRequestHandler], None]


def endless(first: bytes, piece: bytes, content_type: str = "application/json") -> Send:
    """Chunked: `first`, then `piece` again and again."""

    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        sent = 0
        data = first
        try:
            while sent < SENT_AT_MOST:
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                sent += len(data)
                data = piece
        except OSError:  # the client hung up: what a bounded reader does
            pass
        handler.close_connection = True

    return send


def whole(body: bytes, content_type: str = "application/json") -> Send:
    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return send


def hostile_server(routes: dict[str, Send]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer()

        def _answer(self) -> None:
            routes.get(self.path, whole(b'{"error": "not here"}'))(self)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Send]], str]]:
    servers: list[tuple[ThreadingHTTPServer, threading.Thread]] = []

    def start(routes: dict[str, Send]) -> str:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), hostile_server(routes))
        httpd.daemon_threads = True
        thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
        thread.start()
        servers.append((httpd, thread))
        return f"http://127.0.0.1:{httpd.server_address[1]}"

    yield start
    for httpd, thread in servers:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


async def collect(events: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in events]


async def start_fails(url: str) -> tuple[LingChatError, float, int]:
    """The one error `start()` ends in, how long it took and the peak memory it used."""
    backend = RemoteBackend(url)
    tracemalloc.start()
    began = time.perf_counter()
    try:
        with pytest.raises(LingChatError) as failed:
            await collect(backend.start())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await backend.shutdown()
    return failed.value, time.perf_counter() - began, peak


async def test_server_info_streaming_brackets_forever_ends_quickly_in_one_line(serve) -> None:
    url = serve({"/health": whole(b""), "/server_info": endless(b"[", b"[" * PIECE)})

    error, seconds, peak = await start_fails(url)

    assert isinstance(error, BadServerAnswer)
    assert str(error) == (f"{url} sent more than 4 MiB for GET /server_info: not an SGLang answer")
    assert seconds < 10
    assert peak < 64 << 20


async def test_a_deeply_nested_server_info_is_one_line(serve) -> None:
    url = serve({"/health": whole(b""), "/server_info": whole(b"[" * 100_000)})

    error, _, _ = await start_fails(url)

    assert isinstance(error, BadServerAnswer)
    assert str(error) == (
        f"{url} sent a broken answer: the answer to GET /server_info nests deeper than 64 levels"
    )


async def test_an_endless_health_answer_is_one_line(serve) -> None:
    url = serve({"/health": endless(b"x", b"x" * PIECE)})

    error, _, _ = await start_fails(url)

    assert str(error) == f"{url} sent more than 64 KiB for GET /health: not an SGLang answer"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            endless(b"data: ", b"x" * PIECE, EVENTS),
            "an event line is longer than 1,048,576 characters",
        ),
        (
            whole(b"data: " + b"[" * 100_000 + b"\n\n", EVENTS),
            "an event nests deeper than 64 levels",
        ),
        (
            whole(b'data: {"usage": ' + b"{" * 100 + b"\n\n", EVENTS),
            "an event nests deeper than 64 levels",
        ),
    ],
)
async def test_a_reply_stream_past_a_limit_ends_in_one_line(serve, answer, message) -> None:
    url = serve({"/v1/chat/completions": answer})
    backend = RemoteBackend(url)
    tracemalloc.start()
    try:
        events = await collect(backend.stream_reply(HELLO, Sampling(), thinking=NO_THINKING))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await backend.shutdown()

    (error,) = events
    assert isinstance(error, ReplyError)
    assert error.message == f"{url} sent a broken reply stream: {message}"
    assert peak < 64 << 20


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (endless(b"1", b"1" * PIECE), "sent more than 16 MiB for POST /v1/tokenize"),
        (
            whole(b"[" * 100_000),
            "sent a broken answer: the answer to POST /v1/tokenize nests deeper than 64 levels",
        ),
    ],
)
async def test_a_tokenize_answer_past_a_limit_ends_the_reply_in_one_line(
    serve, answer, message
) -> None:
    url = serve({"/v1/tokenize": answer})
    backend = RemoteBackend(url)

    events = await collect(backend.stream_reply(HELLO, Sampling(), thinking=NO_THINKING))
    await backend.shutdown()

    (error,) = events
    assert isinstance(error, ReplyError)
    assert error.message.startswith(f"{url} {message}")
    assert "\n" not in error.message


def sse_reply(*chunks: dict[str, Any]) -> bytes:
    """An event-stream body: each chunk as a `data:` line, then `[DONE]`."""
    lines = [b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks]
    return b"".join(lines) + b"data: [DONE]\n\n"


def text_chunk(text: str, completion_tokens: Any) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        "usage": {"prompt_tokens": 5, "completion_tokens": completion_tokens},
    }


FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
HUGE = 10**30


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        (
            [text_chunk("Hi", 1), text_chunk(" there", 2), {"usage": {"completion_tokens": HUGE}}],
            "completion_tokens = a 100-bit number is not a count in 0..1,000,000,000",
        ),
        (
            [text_chunk("Hi", 1), text_chunk(" there", 2), {"usage": {"completion_tokens": -3}}],
            "completion_tokens = -3 is not a count in 0..1,000,000,000",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"usage": {"prompt_tokens": HUGE}},
            ],
            "prompt_tokens = a 100-bit number is not a count in 0..1,000,000,000",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"sglext": {"spec_tokens_details": {"spec_verify_ct": HUGE}}},
            ],
            "verify_rounds = a 100-bit number is not a count in 0..1,000,000,000",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"sglext": {"spec_tokens_details": {"spec_correct_drafts_histogram": [1, -1]}}},
            ],
            "an accept_histogram bin = -1 is not a count in 0..1,000,000,000",
        ),
        (
            [text_chunk("Hi", 1), text_chunk(" there", 2), {"usage": {"completion_tokens": "2"}}],
            "completion_tokens is '2', not a whole number",
        ),
        (
            [text_chunk("Hi", 1), text_chunk(" there", 2), {"usage": {"completion_tokens": 2.0}}],
            "completion_tokens is 2.0, not a whole number",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"usage": {"prompt_tokens": "5"}},
            ],
            "prompt_tokens is '5', not a whole number",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"usage": {"prompt_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1.5}}},
            ],
            "cached_tokens is 1.5, not a whole number",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"sglext": {"spec_tokens_details": {"spec_verify_ct": "1"}}},
            ],
            "verify_rounds is '1', not a whole number",
        ),
        (
            [
                text_chunk("Hi", 1),
                text_chunk(" there", 2),
                FINISH,
                {"sglext": {"spec_tokens_details": {"spec_correct_drafts_histogram": "1,2"}}},
            ],
            "accept_histogram is '1,2', not a list",
        ),
    ],
)
async def test_an_absurd_count_from_a_server_ends_the_reply_in_one_line_and_it_is_stored(
    serve, tmp_path: Path, chunks: list[dict[str, Any]], message: str
) -> None:
    url = serve({"/v1/chat/completions": whole(sse_reply(*chunks), EVENTS)})
    backend = RemoteBackend(url)
    with ChatStore.open(tmp_path / "history.db") as store:
        conversation = store.create_conversation("numbers")
        request = ReplyRequest(conversation.id, HELLO, Sampling())
        run = ReplyRun(request, store.start_reply(conversation.id), time.perf_counter)
        try:
            async for event in backend.stream_reply(HELLO, Sampling(), thinking=NO_THINKING):
                run.observe(event)  # before: OverflowError storing the reply
        finally:
            await backend.shutdown()
        run.close()
        (reply,) = store.messages(conversation.id)

    assert reply.content == "Hi there"
    assert reply.status is MessageStatus.ERROR
    assert reply.error == f"{url} sent a broken reply stream: impossible usage: {message}"


DRIP_S = 0.2
"""How often a dripping server sends its byte or keepalive."""
DRIPS_AT_MOST = 300
"""A dripping answer's bound (a minute): far past the short waits below."""


def dripping(first: bytes, drip: bytes, content_type: str = "application/json") -> Send:
    """Chunked: `first`, then `drip` every DRIP_S seconds, never ending on its own."""

    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        data = first
        try:
            for _ in range(DRIPS_AT_MOST):
                if data:
                    handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                    handler.wfile.flush()
                time.sleep(DRIP_S)
                data = drip
        except OSError:  # the client gave up and hung up
            pass
        handler.close_connection = True

    return send


WAIT_S = 0.3
HINT = f"within {WAIT_S:g} s (the server wait: server_wait, --server-wait)"
KEEPALIVE = b": keepalive\n\n"


async def test_a_server_that_drips_its_health_answer_is_left_after_the_wait(serve) -> None:
    url = serve({"/health": dripping(b"", b" ")})
    backend = RemoteBackend(url, server_wait=WAIT_S)
    stages = []
    began = time.perf_counter()
    with pytest.raises(LingChatError) as failed:
        async for stage in backend.start():
            stages.append(stage)
    seconds = time.perf_counter() - began
    await backend.shutdown()

    assert str(failed.value) == f"{url} did not send the answer to GET /health {HINT}"
    assert stages[0].detail == f"{url} (waits up to {WAIT_S:g} s)"  # shown while it waits
    assert WAIT_S <= seconds < WAIT_S + 3


async def test_a_warm_up_that_only_gets_keepalives_fails_after_the_wait(serve) -> None:
    url = serve(
        {
            "/health": whole(b""),
            "/server_info": whole(SERVER_INFO),
            "/v1/chat/completions": dripping(b"", KEEPALIVE, "text/event-stream"),
        }
    )
    backend = RemoteBackend(url, server_wait=WAIT_S)
    stages = []
    with pytest.raises(LingChatError) as failed:
        async for stage in backend.start():
            stages.append(stage)
    await backend.shutdown()

    assert str(failed.value) == (
        f"the greedy warm-up reply failed: {url} did not send the reply's first token {HINT}"
    )
    assert stages[-1].name == "warm-up" and stages[-1].detail.endswith(
        f"waits up to {WAIT_S:g} s a token"
    )


async def test_a_reply_that_stalls_on_keepalives_ends_after_the_wait_with_its_text(
    serve,
) -> None:
    first = b"data: " + json.dumps(text_chunk("Hi", 1)).encode() + b"\n\n"
    url = serve({"/v1/chat/completions": dripping(first, KEEPALIVE, "text/event-stream")})
    backend = RemoteBackend(url, server_wait=WAIT_S)
    began = time.perf_counter()
    try:
        events = await collect(backend.stream_reply(HELLO, Sampling(), thinking=NO_THINKING))
    finally:
        await backend.shutdown()
    seconds = time.perf_counter() - began

    chunk, error = events
    assert chunk.answer == "Hi"
    assert isinstance(error, ReplyError)
    assert error.message == f"{url} did not send the reply's next token {HINT}"
    assert seconds < WAIT_S + 3


def _line_just_under_the_limit(**fields: Any) -> bytes:
    """An SGLang-shaped event whose line is a few characters under the 1 MiB line limit and
    that nests 62 levels deep (the limit is 64), its content text filling the rest."""
    fields["pad"] = json.loads("[" * 60 + "]" * 60)
    event = {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": None}], **fields}
    bare = len(b"data: " + json.dumps(event).encode())
    event["choices"][0]["delta"]["content"] = "x" * (MAX_EVENT_LINE - bare - 8)
    line = b"data: " + json.dumps(event).encode() + b"\n"
    assert MAX_EVENT_LINE - 10 < len(line) - 1 < MAX_EVENT_LINE
    return line


TEXT_LINE = _line_just_under_the_limit()
COMMENT_LINE = b": " + b"k" * (MAX_EVENT_LINE - 10) + b"\n"
TINY_LINE = b'data: {"choices": []}\n'


@pytest.mark.parametrize(
    ("piece", "bound"),
    [
        (
            TEXT_LINE,
            f"more than {MAX_REPLY_CHARS:,} characters of text for one reply (a message's limit)",
        ),
        (COMMENT_LINE, f"more than {MAX_REPLY_BYTES >> 20} MiB for one reply"),
        pytest.param(
            TINY_LINE * 1000,
            f"more than {MAX_REPLY_EVENTS:,} event lines for one reply",
            marks=pytest.mark.slow,  # 262,144 lines parsed under tracemalloc: some 15 s
        ),
    ],
    ids=["text", "bytes", "events"],
)
async def test_a_stream_of_valid_lines_under_every_line_limit_ends_at_a_reply_bound(
    serve, tmp_path: Path, piece: bytes, bound: str
) -> None:
    """Before: many such lines took 1.6 GB and a core for a minute, until the server wait
    fired and blamed the server. Now one line names the bound, the text so far is stored,
    and the memory the reply holds stays far below what the server sent."""
    url = serve({"/v1/chat/completions": endless(piece, piece, EVENTS)})
    backend = RemoteBackend(url)
    with ChatStore.open(tmp_path / "history.db") as store:
        conversation = store.create_conversation("hostile")
        request = ReplyRequest(conversation.id, HELLO, Sampling())
        run = ReplyRun(request, store.start_reply(conversation.id), time.perf_counter)
        tracemalloc.start()
        try:
            async for event in backend.stream_reply(HELLO, Sampling(), thinking=NO_THINKING):
                run.observe(event)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            await backend.shutdown()
        run.close()
        (reply,) = store.messages(conversation.id)

    assert reply.status is MessageStatus.ERROR
    assert reply.error == f"{url} sent {bound}: not an SGLang reply, read no further"
    assert len(reply.content) <= MAX_REPLY_CHARS
    if piece is TEXT_LINE:
        assert reply.content == json.loads(TEXT_LINE[6:])["choices"][0]["delta"]["content"]
    assert peak < 64 << 20


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (b"<!doctype html>\n<html><body>Sign in</body></html>", "text/html"),
        (b'{"error": "no such route"}', "application/json"),
    ],
)
async def test_a_chat_answer_that_is_no_event_stream_says_what_it_is(
    serve, body: bytes, kind: str
) -> None:
    """Before: an HTML page without a last newline read as a stream that ended early,
    `the server may have died`."""
    url = serve({"/v1/chat/completions": whole(body, kind)})
    backend = RemoteBackend(url)
    try:
        events = await collect(backend.stream_reply(HELLO, Sampling(), thinking=NO_THINKING))
    finally:
        await backend.shutdown()
    (error,) = events
    assert error.message == (
        f"{url} answered POST /v1/chat/completions with {kind}, not an event stream: not an "
        "SGLang chat endpoint (a web page or a proxy at that address?)"
    )
