"""RemoteBackend against test doubles of SGLang 0.5.23's HTTP API, plus two real sockets.

Wire shapes are copied from the 0.5.23 source (paths under `sglang/srt/`):
content chunks `entrypoints/openai/sse_utils.py:13-99`, sglext and usage chunks
`entrypoints/openai/protocol.py:221-230, 456-503, 1388-1402`, the stream's order
`entrypoints/openai/serving_chat.py:2441-2805`, errors `serving_base.py:205-237` and
`utils/auth.py:192-204`, `/server_info` `entrypoints/http_server.py:863-890`.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.backend.proof import PROOF_KEY
from app.backend.protocol import (
    BackendInfo,
    DraftShape,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
)
from app.backend.remote import remote
from app.backend.remote.remote import RemoteBackend, is_loopback
from app.backend.warmup import SAMPLED_WARMUP, WARMUP_SAMPLING
from app.backend.wire import ChatStream, SSELines, WireError
from app.core.chat import DEFAULT_THINKING, ChatMessage, Role, Sampling, Thinking
from app.core.errors import BackendError, ConfigError, ProofFailed, ServerError
from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.core.reply_usage import ReplyUsage
from app.telemetry.metrics import reply_stats

URL = "http://127.0.0.1:30000"
MODEL_PATH = "inclusionAI/Ling-3.0-flash-fp4"
CREATED = 1767225600
HELLO = (ChatMessage(Role.SYSTEM, "Be brief."), ChatMessage(Role.USER, "Count to 3."))
SAMPLING = Sampling(temperature=0.6, top_p=0.95, top_k=29, max_new_tokens=256)
REASONING = ("The user", " wants 1 to 3.")
ANSWER = ("1, 2", ", 3")
SPEC = {
    # SpecTokensDetails (protocol.py:456-467) of a 42-token reply in 15 verify rounds with
    # NEXTN 3/1/4: 15 * 3 proposed drafts, 27 accepted, 42 / 15 = 2.8 tokens per round.
    "spec_accept_rate": 0.6,
    "spec_accept_length": 2.8,
    "spec_cap_length": 0.0,
    "spec_block_accept_length": 0.0,
    "spec_num_correct_drafts": 27,
    "spec_num_proposed_drafts": 45,
    "spec_verify_ct": 15,
    "spec_correct_drafts_histogram": [1, 5, 5, 4],
    "spec_cap_lens_histogram": [],
}
PROOF = {
    "speculative": {
        "worker": "EAGLEWorkerV2",
        "draft_worker": "EagleDraftWorker",
        "num_steps": 3,
        "topk": 1,
        "num_draft_tokens": 4,
    },
    "sharing": {"head_module_shared": True, "embed_shared": True},
}


async def stream_then(
    backend: RemoteBackend, action: Callable[[], Awaitable[object]]
) -> list[ReplyEvent]:
    """Stream one reply, running `action` once two events have arrived; all the events."""
    events: list[ReplyEvent] = []
    async for event in backend.stream_reply(HELLO, SAMPLING):
        events.append(event)
        if len(events) == 2:
            await action()
    return events


def server_info(proof: dict[str, Any] | None = PROOF, speculative: str | None = "EAGLE") -> dict:
    """A trimmed `/server_info`: resolved server args, then `scheduler_infos[0]` merged in
    at the top level (utils/common.py:3584-3593), then the endpoint's own keys."""
    info: dict[str, Any] = {
        "model_path": MODEL_PATH,
        "tokenizer_path": MODEL_PATH,
        "served_model_name": MODEL_PATH,
        "dtype": "bfloat16",
        "moe_runner_backend": "humming",
        "speculative_algorithm": speculative,  # NEXTN resolves to EAGLE
        "speculative_num_steps": 3,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 4,
        "reasoning_parser": "ling3",
        "launch_command": f"python -m sglang.launch_server --model-path {MODEL_PATH}",
        "status": "ready",
        "max_total_num_tokens": 1048576,
        "max_req_input_len": 131066,
        "startup_time": 1767225500.0,
        "hicache_object_layout": None,
        "kv_events": None,
        "internal_states": [{"avg_spec_accept_length": None, "last_gen_throughput": 0.0}],
        "version": "0.5.23",
        "frontend": "python",
    }
    if proof is not None:
        info[PROOF_KEY] = proof
    return info


def usage(completion: int, reasoning: int = 0, prompt: int = 17) -> dict[str, Any]:
    """`UsageInfo.model_dump()` (protocol.py:221-230)."""
    return {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": reasoning,
        "completion_tokens_details": {"reasoning_tokens": reasoning} if reasoning else None,
    }


def chunk(
    rid: str,
    delta: dict[str, Any],
    *,
    finish: str | None = None,
    matched: int | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A choice chunk as `build_sse_content` encodes it (sse_utils.py:13-99)."""
    body: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL_PATH,
        "choices": [
            {
                "index": 0,
                "delta": {"reasoning_content": None, **delta},
                "logprobs": None,
                "finish_reason": finish,
                "matched_stop": matched,
            }
        ],
    }
    if usage is not None:
        body["usage"] = usage
    return body


def tail_chunk(rid: str, **fields: Any) -> dict[str, Any]:
    """A `ChatCompletionStreamResponse` with no choices: the sglext or the usage chunk."""
    return {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": MODEL_PATH,
        "choices": [],
        "usage": None,
        **fields,
    }


def reply_chunks(
    rid: str,
    reasoning: tuple[str, ...] = REASONING,
    answer: tuple[str, ...] = ANSWER,
    *,
    finish: str = "stop",
    spec: dict[str, Any] | None = SPEC,
) -> list[dict[str, Any]]:
    """One whole reply in SGLang's order; each text chunk carries 3 new tokens."""
    chunks = [chunk(rid, {"role": "assistant", "content": ""})]
    texts = [("reasoning_content", t) for t in reasoning] + [("content", t) for t in answer]
    for n, (kind, text) in enumerate(texts, 1):
        chunks.append(chunk(rid, {kind: text}, usage=usage(3 * n)))
    chunks.append(chunk(rid, {}, finish=finish, matched=154 if finish == "stop" else None))
    if spec is not None:
        chunks.append(tail_chunk(rid, sglext={"spec_tokens_details": spec}))
    chunks.append(tail_chunk(rid, usage=usage(42, reasoning=12)))
    return chunks


def sse(*events: dict[str, Any] | str) -> bytes:
    """SSE bytes as msgspec/pydantic write them (compact, raw UTF-8); a str is sent as is."""
    payloads = (
        e if isinstance(e, str) else json.dumps(e, separators=(",", ":"), ensure_ascii=False)
        for e in events
    )
    return b"".join(f"data: {payload}\n\n".encode() for payload in payloads)


Stream = Callable[[str], AsyncIterator[bytes]]


async def whole_reply(rid: str) -> AsyncIterator[bytes]:
    for event in reply_chunks(rid):
        yield sse(event)
    yield sse("[DONE]")


class FakeSGLangServerDouble:
    """A test double of SGLang 0.5.23's HTTP API for `httpx.MockTransport`.

    Health, server info, abort and streamed chat replies; `routes` replaces any path's
    answer, `stream` the reply body (called with the request's rid).
    """

    def __init__(
        self,
        info: dict[str, Any] | None = None,
        stream: Stream = whole_reply,
        *,
        api_key: str | None = None,
    ) -> None:
        self.info = server_info() if info is None else info
        self.stream = stream
        self.api_key = api_key
        self.routes: dict[str, Callable[[httpx.Request], httpx.Response]] = {}
        self.requests: list[httpx.Request] = []
        self.aborted: list[str] = []
        self.abort_status = 200
        self.abort_received = asyncio.Event()
        self.context_len = 131072
        """`max_model_len` of `/v1/tokenize`, which counts one token per character."""

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [
            json.loads(r.content) for r in self.requests if r.url.path == "/v1/chat/completions"
        ]

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        if path in self.routes:
            return self.routes[path](request)
        if (
            self.api_key
            and not path.startswith("/health")  # utils/auth.py:101-105
            and request.headers.get("authorization") != f"Bearer {self.api_key}"
        ):
            return httpx.Response(401, json={"error": "Unauthorized"})
        if path == "/health":
            return httpx.Response(200)
        if path == "/server_info":
            return httpx.Response(200, json=self.info)
        if path == "/abort_request":
            self.aborted.append(json.loads(request.content)["rid"])
            self.abort_received.set()
            return httpx.Response(self.abort_status)
        if path == "/v1/tokenize":
            messages = json.loads(request.content)["messages"]
            count = sum(len(m["content"]) for m in messages)
            return httpx.Response(
                200, json={"tokens": [0] * count, "count": count, "max_model_len": self.context_len}
            )
        if path == "/v1/chat/completions":
            rid = json.loads(request.content)["rid"]
            headers = {"content-type": "text/event-stream; charset=utf-8"}
            return httpx.Response(200, headers=headers, content=self.stream(rid))
        return httpx.Response(404, json={"detail": "Not Found"})


class BuildReportDouble:
    """Stands in for `app.backend.proof.build_report`: records calls, passes everything."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, facts: Any, **kwargs: Any) -> ProofReport:
        self.calls.append({"facts": facts, **kwargs})
        line = ProofLine("humming", "Humming", Verdict.PASS, "all layers")
        return ProofReport(kwargs["profile"], (line,), dict(facts))


@pytest.fixture
async def connect() -> AsyncIterator[Callable[..., RemoteBackend]]:
    """Makes RemoteBackends talking to a server double; closes their clients afterwards."""
    clients: list[httpx.AsyncClient] = []

    def make(server: FakeSGLangServerDouble, url: str = URL, **kwargs: Any) -> RemoteBackend:
        client = httpx.AsyncClient(transport=httpx.MockTransport(server))
        clients.append(client)
        return RemoteBackend(url, client=client, **kwargs)

    yield make
    for client in clients:
        await client.aclose()


@pytest.fixture
def build_report(monkeypatch: pytest.MonkeyPatch) -> BuildReportDouble:
    double = BuildReportDouble()
    monkeypatch.setattr(remote, "build_report", double)
    return double


async def collect(events: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in events]


def refuse(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("[Errno 111] Connection refused", request=request)


def time_out(error: type[httpx.TimeoutException]) -> Callable[[httpx.Request], httpx.Response]:
    def answer(request: httpx.Request) -> httpx.Response:
        raise error("timed out", request=request)

    return answer


# --- start-up ---------------------------------------------------------------------------


async def test_start_reads_server_info_warms_up_and_judges_the_published_proof(
    connect: Callable[..., RemoteBackend], build_report: BuildReportDouble
) -> None:
    server = FakeSGLangServerDouble()
    backend = connect(server, min_accept_length=2.0)

    stages = await collect(backend.start())

    assert [(s.name, s.done) for s in stages] == [
        ("connect", False),
        ("connect", True),
        ("server info", False),
        ("server info", True),
        ("warm-up", False),
        ("warm-up", True),
        ("proof", False),
        ("proof", True),
    ]
    assert stages[-3].detail == "accept length 2.80"
    assert build_report.calls == [
        {
            "facts": PROOF,
            "profile": "stack",
            "min_accept_length": 2.0,
            "warmup_accept_length": 2.8,
        }
    ]
    assert (await backend.proof()).ok
    assert backend.info == BackendInfo(
        "server",
        MODEL_PATH,
        "0.5.23",
        "stack",
        True,
        context_length=server.context_len,
        draft=DraftShape(3, 4),
    )
    greedy, sampled = server.chat_bodies()
    assert greedy["temperature"] == 0.0
    assert greedy["max_completion_tokens"] == WARMUP_SAMPLING.max_new_tokens
    assert sampled["temperature"] == SAMPLED_WARMUP.temperature > 0
    assert sampled["max_completion_tokens"] == SAMPLED_WARMUP.max_new_tokens


async def test_info_is_blank_before_start_and_proof_needs_start(
    connect: Callable[..., RemoteBackend],
) -> None:
    backend = connect(FakeSGLangServerDouble(), profile="baseline")

    assert backend.info == BackendInfo("server", "", "", "baseline", False)
    with pytest.raises(BackendError, match="needs start"):
        await backend.proof()


async def test_plain_server_without_proof_is_refused(
    connect: Callable[..., RemoteBackend],
) -> None:
    info = server_info(proof=None, speculative=None)
    backend = connect(FakeSGLangServerDouble(info, lambda rid: reply_stream(rid, spec=None)))

    with pytest.raises(ProofFailed, match="publishes no ling_chat_proof") as refused:
        await collect(backend.start())

    report = await backend.proof()
    assert not report.ok
    assert "humming" in {line.key for line in report.failed}
    assert "\n" not in str(refused.value)
    assert str(refused.value).endswith("or chat anyway with --allow-unoptimized")


async def test_plain_server_is_used_when_unoptimized_is_allowed(
    connect: Callable[..., RemoteBackend],
) -> None:
    info = server_info(proof=None, speculative=None)
    server = FakeSGLangServerDouble(info, lambda rid: reply_stream(rid, spec=None))
    backend = connect(server, allow_unoptimized=True)

    stages = await collect(backend.start())

    assert stages[-3].detail == "no speculative stats"
    assert stages[-1].done and stages[-1].detail.endswith("unproven, chatting anyway")
    assert not (await backend.proof()).ok
    events = await collect(backend.stream_reply(HELLO, SAMPLING))
    assert isinstance(events[-1], ReplyDone)


async def test_failing_proof_names_the_failed_levers(
    connect: Callable[..., RemoteBackend],
) -> None:
    backend = connect(FakeSGLangServerDouble())

    with pytest.raises(ProofFailed) as refused:
        await collect(backend.start())

    failed = (await backend.proof()).failed
    assert failed
    assert all(line.title in str(refused.value) for line in failed)


DSPARK_ARGS = {
    "speculative_algorithm": "DSPARK",
    "speculative_num_steps": 1,
    "speculative_num_draft_tokens": 9,
}
"""What a DSpark server's `/server_info` resolves, its block left to the draft checkpoint."""


@pytest.mark.parametrize(
    ("args", "proof", "draft"),
    [
        pytest.param({}, None, DraftShape(3, 4), id="nextn-args"),
        pytest.param(
            {},
            {"speculative": {"num_steps": 2, "num_draft_tokens": 3}},
            DraftShape(2, 3),
            id="nextn-live-facts-first",
        ),
        pytest.param(DSPARK_ARGS, None, DraftShape(1, 9, block=8), id="dspark-args"),
        pytest.param(
            {**DSPARK_ARGS, "speculative_dspark_block_size": 8},
            {"dspark": {"gamma": 4, "verify_window": 5}, "speculative": None},
            DraftShape(1, 5, block=4),
            id="dspark-live-facts-first",
        ),
        pytest.param({"speculative_algorithm": None}, None, None, id="no-speculation"),
    ],
)
async def test_info_shows_the_draft_depth_the_server_runs(
    connect: Callable[..., RemoteBackend],
    build_report: BuildReportDouble,
    args: dict[str, Any],
    proof: dict[str, Any] | None,
    draft: DraftShape | None,
) -> None:
    backend = connect(FakeSGLangServerDouble({**server_info(proof=proof), **args}))
    await collect(backend.start())
    assert backend.info.draft == draft


NO_STEPS = {"speculative_num_steps": "3"}


@pytest.mark.parametrize(
    ("hostile", "draft"),
    [
        (NO_STEPS, None),
        ({"speculative_num_steps": [3]}, None),
        ({"speculative_num_steps": True}, None),
        ({"speculative_num_draft_tokens": 10**30}, None),
        ({"speculative_num_draft_tokens": -4}, None),
        ({**DSPARK_ARGS, "speculative_num_draft_tokens": "9"}, None),
        ({"speculative_eagle_topk": {"k": 1}}, DraftShape(3, 4)),
        # Broken live facts leave the shape to the server args.
        ({PROOF_KEY: {"speculative": {"num_steps": 3.5}}}, DraftShape(3, 4)),
        ({PROOF_KEY: {"dspark": {"gamma": "8", "verify_window": 9}}}, DraftShape(3, 4)),
        ({PROOF_KEY: ["speculative"], **NO_STEPS}, None),
        ({PROOF_KEY: {"speculative": "EAGLE"}, **NO_STEPS}, None),
    ],
)
async def test_a_hostile_draft_shape_is_not_shown_and_chatting_goes_on(
    connect: Callable[..., RemoteBackend],
    build_report: BuildReportDouble,
    hostile: dict[str, Any],
    draft: DraftShape | None,
) -> None:
    backend = connect(FakeSGLangServerDouble({**server_info(proof=None), **hostile}))
    await collect(backend.start())
    assert backend.info.draft == draft
    events = await collect(backend.stream_reply(HELLO, SAMPLING))
    assert isinstance(events[-1], ReplyDone)


@pytest.mark.parametrize(
    ("path", "answer", "message"),
    [
        ("/health", refuse, r"cannot connect to http://127\.0\.0\.1:30000 \(GET /health\): "),
        ("/health", time_out(httpx.ConnectTimeout), r"timed out connecting to .* after 5 s"),
        (
            "/server_info",
            time_out(httpx.ReadTimeout),
            r"sent nothing for 30 s \(GET /server_info\)",
        ),
        ("/health", lambda r: httpx.Response(503), r"not ready \(HTTP 503 on GET /health\)"),
        ("/health", lambda r: httpx.Response(404), r"not an SGLang server \(GET /health: HTTP"),
        (
            "/server_info",
            lambda r: httpx.Response(404, json={"detail": "Not Found"}),
            r"not an SGLang server \(GET /server_info: HTTP 404\)",
        ),
        (
            "/server_info",
            lambda r: httpx.Response(200, html="<!doctype html><title>Router</title>"),
            r"not an SGLang server: GET /server_info returned text/html, not JSON",
        ),
        (
            "/server_info",
            lambda r: httpx.Response(200, json={"status": "ok", "version": "2.1"}),
            r"not an SGLang server: .* JSON without SGLang's 'version' and 'model_path'",
        ),
        (
            "/server_info",
            lambda r: httpx.Response(403, json={"error": "Forbidden"}),
            r"refused the API key \(HTTP 403 on GET /server_info\)",
        ),
        (
            "/v1/chat/completions",
            lambda r: httpx.Response(500, json={"object": "error", "message": "boom\nat x"}),
            r"^the greedy warm-up reply failed: POST /v1/chat/completions .* HTTP 500: boom at x$",
        ),
    ],
)
async def test_start_fails_with_one_line(
    connect: Callable[..., RemoteBackend],
    path: str,
    answer: Callable[[httpx.Request], httpx.Response],
    message: str,
) -> None:
    server = FakeSGLangServerDouble()
    server.routes[path] = answer
    backend = connect(server)

    with pytest.raises(ServerError, match=message) as failed:
        await collect(backend.start())

    assert "\n" not in str(failed.value)


async def test_a_server_that_cannot_sample_is_refused_at_the_sampled_warm_up(
    connect: Callable[..., RemoteBackend],
) -> None:
    # What SGLang 0.5.23 without FlashInfer does: greedy NEXTN works, sampled verify fails.
    def greedy_only(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["temperature"] == 0.0:
            headers = {"content-type": "text/event-stream; charset=utf-8"}
            return httpx.Response(200, headers=headers, content=whole_reply(body["rid"]))
        error = "ModuleNotFoundError: No module named 'flashinfer'"
        return httpx.Response(500, json={"object": "error", "message": error})

    server = FakeSGLangServerDouble()
    server.routes["/v1/chat/completions"] = greedy_only
    backend = connect(server)

    with pytest.raises(ServerError, match=r"^the sampled warm-up reply failed: .*flashinfer'$"):
        await collect(backend.start())

    assert [body["temperature"] for body in server.chat_bodies()] == [0.0, 0.6]


@pytest.mark.parametrize(
    ("api_key", "message"),
    [(None, "requires an API key"), ("wrong", "rejected the API key")],
)
async def test_start_explains_a_missing_or_wrong_api_key(
    connect: Callable[..., RemoteBackend], api_key: str | None, message: str
) -> None:
    backend = connect(FakeSGLangServerDouble(api_key="secret"), api_key=api_key)

    with pytest.raises(ServerError, match=rf"{message} \(HTTP 401 on GET /server_info\)"):
        await collect(backend.start())


async def test_api_key_is_sent_as_a_bearer_token(
    connect: Callable[..., RemoteBackend], build_report: BuildReportDouble
) -> None:
    server = FakeSGLangServerDouble(api_key="secret")
    backend = connect(server, api_key="secret")

    await collect(backend.start())

    assert {r.headers["authorization"] for r in server.requests} == {"Bearer secret"}


# --- replies ----------------------------------------------------------------------------


async def test_reply_streams_reasoning_then_answer_and_ends_with_spec_stats(
    connect: Callable[..., RemoteBackend], build_report: BuildReportDouble
) -> None:
    server = FakeSGLangServerDouble()
    backend = connect(server)
    await collect(backend.start())

    events = await collect(backend.stream_reply(HELLO, SAMPLING))

    *chunks, done = events
    assert [(c.reasoning, c.answer, c.completion_tokens) for c in chunks] == [
        ("The user", "", 3),
        (" wants 1 to 3.", "", 6),
        ("", "1, 2", 9),
        ("", ", 3", 12),
    ]
    assert chunks == sorted(chunks, key=lambda c: c.at) and done.at >= chunks[-1].at
    assert isinstance(done, ReplyDone) and done.finish_reason == "stop"
    assert done.usage == ReplyUsage(
        completion_tokens=42,
        prompt_tokens=17,
        verify_rounds=15,
        correct_drafts=27,
        proposed_drafts=45,
        accept_histogram=(1, 5, 5, 4),
    )
    assert done.usage.accept_length == pytest.approx(SPEC["spec_accept_length"])
    assert done.usage.accept_rate == pytest.approx(SPEC["spec_accept_rate"])
    stats = reply_stats(0.0, [c.at for c in chunks], done.usage, done.at)
    assert stats.accept_length == pytest.approx(2.8)
    assert stats.accept_histogram == (1, 5, 5, 4)


async def test_reply_request_carries_template_inputs_sampling_and_stat_options(
    connect: Callable[..., RemoteBackend], build_report: BuildReportDouble
) -> None:
    server = FakeSGLangServerDouble()
    backend = connect(server)
    await collect(backend.start())

    await collect(backend.stream_reply(HELLO, SAMPLING))

    body = server.chat_bodies()[-1]
    assert body["rid"].startswith("ling-chat-")
    del body["rid"]
    assert body == {
        "model": MODEL_PATH,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Count to 3."},
        ],
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "return_spec_tokens_details": True,
        "separate_reasoning": False,
        "chat_template_kwargs": {"enable_thinking": True},
        "temperature": 0.6,
        "top_p": 0.95,
        "top_k": 29,
        "max_completion_tokens": DEFAULT_THINKING.budget,  # the thinking's, to `</think>`
        "stop": ["</think>"],
    }


async def reply_stream(
    rid: str, *, spec: dict[str, Any] | None = SPEC, then: Callable[[], Any] | None = None
) -> AsyncIterator[bytes]:
    """Role and two reasoning chunks; then, if given, await `then()` and end as aborted."""
    if then is None:
        for event in reply_chunks(rid, spec=spec):
            yield sse(event)
        yield sse("[DONE]")
        return
    yield sse(*reply_chunks(rid)[:3])
    await then()
    aborted = reply_chunks(rid, (), (), finish="abort", spec={**SPEC, "spec_verify_ct": 3})
    yield sse(*aborted[1:], "[DONE]")


async def test_stop_mid_reply_aborts_on_the_server_and_keeps_the_partial_reply(
    connect: Callable[..., RemoteBackend],
) -> None:
    server = FakeSGLangServerDouble()
    server.stream = lambda rid: reply_stream(rid, then=server.abort_received.wait)
    backend = connect(server)

    events = await stream_then(backend, backend.stop_reply)

    assert [e.reasoning for e in events[:2] if isinstance(e, TextChunk)] == list(REASONING)
    done = events[-1]
    assert len(events) == 3 and isinstance(done, ReplyDone)
    assert done.finish_reason == "abort"
    assert (done.usage.completion_tokens, done.usage.verify_rounds) == (42, 3)
    assert server.aborted == [server.chat_bodies()[0]["rid"]]


@pytest.mark.parametrize("abort_status", [200, 401])
async def test_stop_closes_the_stream_when_the_server_does_not_end_it(
    connect: Callable[..., RemoteBackend], monkeypatch: pytest.MonkeyPatch, abort_status: int
) -> None:
    """A server that ignores the abort is cut off after the grace time; one that refuses
    it (HTTP 401: admin key, utils/auth.py:132-145) is cut off at once."""
    if abort_status == 200:
        monkeypatch.setattr(remote, "STOP_GRACE_S", 0.01)
    server = FakeSGLangServerDouble()
    server.stream = lambda rid: reply_stream(rid, then=asyncio.Event().wait)
    server.abort_status = abort_status
    backend = connect(server)

    events = await stream_then(backend, lambda: asyncio.wait_for(backend.stop_reply(), 1.0))

    done = events[-1]
    assert len(events) == 3 and isinstance(done, ReplyDone)
    assert done.finish_reason == "abort"
    assert done.usage.completion_tokens == 6
    assert done.usage.verify_rounds == 0 and done.usage.accept_length is None


async def test_stream_cut_off_after_an_abort_still_ends_as_aborted(
    connect: Callable[..., RemoteBackend],
) -> None:
    server = FakeSGLangServerDouble()

    async def cut_off_on_abort(rid: str) -> AsyncIterator[bytes]:
        yield sse(*reply_chunks(rid)[:3])
        await server.abort_received.wait()

    server.stream = cut_off_on_abort
    backend = connect(server)

    events = await stream_then(backend, backend.stop_reply)

    assert isinstance(events[-1], ReplyDone) and events[-1].finish_reason == "abort"


async def test_stop_without_a_reply_does_nothing(connect: Callable[..., RemoteBackend]) -> None:
    server = FakeSGLangServerDouble()

    await connect(server).stop_reply()

    assert server.requests == []


async def partial_then(tail: bytes | BaseException) -> AsyncIterator[bytes]:
    yield sse(*reply_chunks("rid-1")[:3])
    if isinstance(tail, BaseException):
        raise tail
    yield tail


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (b"", r"ended early \(no \[DONE\]\): the server may have died$"),
        (
            httpx.RemoteProtocolError("peer closed connection without sending complete body"),
            r"closed the connection \(POST /v1/chat/completions\): the server may have died",
        ),
        (b'data: {"id":"rid-1","choices":[\n\n', r"broken reply stream: invalid JSON"),
        (b"<html><body>502 Bad Gateway</body></html>\n", r"not an event-stream line"),
        (b"data: [1, 2]\n\n", r"an event is not a JSON object"),
        (
            # serving_chat.py:2566-2579 with create_streaming_error_response's json.dumps
            b'data: {"error": {"object": "error", "message": "Memory pool exhausted", '
            b'"type": "SERVICE_UNAVAILABLE", "param": null, "code": 503}}\n\n',
            r"^the server reported an error: Memory pool exhausted$",
        ),
        (sse(chunk("rid-1", {}), "[DONE]"), r"ended without a finish reason"),
    ],
)
async def test_broken_stream_keeps_the_partial_reply_and_ends_with_one_line(
    connect: Callable[..., RemoteBackend], tail: bytes | BaseException, message: str
) -> None:
    backend = connect(FakeSGLangServerDouble(stream=lambda rid: partial_then(tail)))

    events = await collect(backend.stream_reply(HELLO, SAMPLING))

    *chunks, error = events
    assert [c.reasoning for c in chunks] == list(REASONING)
    assert isinstance(error, ReplyError)
    assert "\n" not in error.message
    assert re.search(message, error.message), error.message


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (refuse, r"^cannot connect to .* \(POST /v1/chat/completions\): \[Errno 111\]"),
        (
            lambda r: httpx.Response(
                400,
                json={
                    "object": "error",
                    "message": "The input (140000 tokens) is longer than the model's "
                    "context length (131072 tokens).",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                },
            ),
            r"HTTP 400: The input \(140000 tokens\) is longer",
        ),
        (
            lambda r: httpx.Response(401, json={"error": "Unauthorized"}),
            r"requires an API key \(HTTP 401 on POST /v1/chat/completions\)",
        ),
    ],
)
async def test_refused_reply_ends_with_one_line(
    connect: Callable[..., RemoteBackend],
    answer: Callable[[httpx.Request], httpx.Response],
    message: str,
) -> None:
    server = FakeSGLangServerDouble()
    server.routes["/v1/chat/completions"] = answer

    [error] = await collect(connect(server).stream_reply(HELLO, SAMPLING))

    assert isinstance(error, ReplyError)
    assert re.search(message, error.message), error.message


# --- URLs, warnings, shutdown -----------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "warns"),
    [
        ("http://10.0.0.7:30000", True),
        ("http://gpu-box.lan:30000", True),
        ("https://10.0.0.7:30000", False),
        ("http://127.0.0.1:30000", False),
        ("http://127.8.9.10:30000", False),
        ("http://localhost:30000", False),
        ("http://[::1]:30000", False),
    ],
)
def test_plain_http_to_another_machine_warns(url: str, warns: bool) -> None:
    backend = RemoteBackend(url)

    assert bool(backend.warnings) is warns
    assert all(httpx.URL(url).host in warning for warning in backend.warnings)


async def test_warning_is_shown_when_connected(
    connect: Callable[..., RemoteBackend], build_report: BuildReportDouble
) -> None:
    backend = connect(FakeSGLangServerDouble(), url="http://10.0.0.7:30000/")

    stages = await collect(backend.start())

    assert stages[1].detail == backend.warnings[0]
    assert "unencrypted" in stages[1].detail


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.255.0.3", "::1"])
def test_loopback_hosts(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["10.0.0.7", "128.0.0.1", "::2", "localhost.example"])
def test_non_loopback_hosts(host: str) -> None:
    assert not is_loopback(host)


@pytest.mark.parametrize(
    ("url", "profile"), [("ftp://host", "stack"), ("localhost:30000", "stack"), (URL, "turbo")]
)
def test_bad_url_or_profile_is_a_config_error(url: str, profile: str) -> None:
    with pytest.raises(ConfigError):
        RemoteBackend(url, profile=profile)


async def test_shutdown_closes_only_the_client_it_made() -> None:
    own = RemoteBackend(URL)
    given_client = httpx.AsyncClient()
    borrowed = RemoteBackend(URL, client=given_client)

    await own.shutdown()
    await borrowed.shutdown()

    assert not given_client.is_closed
    await given_client.aclose()
    with pytest.raises(RuntimeError, match="client has been closed"):
        await collect(own.stream_reply(HELLO, SAMPLING))


async def test_shutdown_ends_a_reply_in_flight_as_aborted(
    connect: Callable[..., RemoteBackend],
) -> None:
    server = FakeSGLangServerDouble()
    server.stream = lambda rid: reply_stream(rid, then=asyncio.Event().wait)
    backend = connect(server)

    events = await stream_then(backend, backend.shutdown)

    assert isinstance(events[-1], ReplyDone) and events[-1].finish_reason == "abort"


# --- the wire parser --------------------------------------------------------------------


def test_event_names_comments_and_blank_lines_are_skipped() -> None:
    stream = ChatStream()

    assert stream.feed("event: sglext_ids", 1.0) == []
    assert stream.feed(": keep-alive", 1.0) == []
    assert stream.feed("", 1.0) == []


def test_tool_call_finish_reads_as_stop_and_an_empty_histogram_reads_as_none() -> None:
    stream = ChatStream()
    spec = {**SPEC, "spec_correct_drafts_histogram": []}
    data = sse(
        chunk("rid-1", {"content": "x"}),
        chunk("rid-1", {}, finish="tool_calls"),
        tail_chunk("rid-1", sglext={"spec_tokens_details": spec}),
        "[DONE]",
    )

    *_, done = [e for line in SSELines().feed(data) for e in stream.feed(line, 1.0)]

    assert isinstance(done, ReplyDone) and done.finish_reason == "stop"
    assert done.usage.accept_histogram is None and done.usage.verify_rounds == 15


def test_a_data_field_without_colon_is_rejected() -> None:
    with pytest.raises(WireError, match="not an event-stream line"):
        ChatStream().feed("data", 1.0)


TEXT = st.text(st.characters(codec="utf-8"), min_size=1) | st.sampled_from(
    ["\u2028", "\x85", "\u2029", "a\r\nb", "\x0b"]  # str.splitlines would split at these
)


@given(
    reasoning=st.lists(TEXT, max_size=5).map(tuple),
    answer=st.lists(TEXT, max_size=5).map(tuple),
    cuts=st.lists(st.integers(min_value=0), max_size=20),
)
def test_any_text_survives_the_wire_however_the_bytes_arrive(
    reasoning: tuple[str, ...], answer: tuple[str, ...], cuts: list[int]
) -> None:
    data = sse(*reply_chunks("rid-1", reasoning, answer), "[DONE]")
    bounds = sorted({0, len(data), *(cut % (len(data) + 1) for cut in cuts)})
    lines, stream = SSELines(), ChatStream()

    events = [
        event
        for start, end in zip(bounds, bounds[1:], strict=False)
        for line in lines.feed(data[start:end])
        for event in stream.feed(line, 1.0)
    ]

    chunks = [e for e in events if isinstance(e, TextChunk)]
    assert "".join(c.reasoning for c in chunks) == "".join(reasoning)
    assert "".join(c.answer for c in chunks) == "".join(answer)
    assert isinstance(events[-1], ReplyDone) and stream.ended


# --- real sockets -----------------------------------------------------------------------


class _DiesMidReply(BaseHTTPRequestHandler):
    """Streams two chunks of a chunked SSE reply, then drops the connection."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        rid = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["rid"]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in reply_chunks(rid)[:3]:
            data = sse(event)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def dying_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _DiesMidReply)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join()


async def test_server_dying_mid_reply_over_a_real_socket(dying_server: str) -> None:
    backend = RemoteBackend(dying_server)

    events = await collect(backend.stream_reply(HELLO, SAMPLING))
    await backend.shutdown()

    *chunks, error = events
    assert [c.reasoning for c in chunks] == list(REASONING)
    assert isinstance(error, ReplyError)
    assert "closed the connection" in error.message


async def test_connection_refused_over_a_real_socket() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = RemoteBackend(f"http://127.0.0.1:{port}")

    with pytest.raises(ServerError, match=r"^cannot connect to http://127\.0\.0\.1:\d+ \(GET"):
        await collect(backend.start())
    await backend.shutdown()


PROMPT_CHARS = sum(len(m.content) for m in HELLO)
RESERVED = 4
"""NEXTN 3/1/4 reserves max(1 * 3, 4) draft slots per request (managers/utils.py:484-500)."""


async def test_a_long_conversation_asks_only_for_the_room_left(connect, build_report):
    server = FakeSGLangServerDouble()
    server.context_len = PROMPT_CHARS + RESERVED + 100
    backend = connect(server)
    await collect(backend.start())
    events = await collect(backend.stream_reply(HELLO, SAMPLING))
    assert isinstance(events[-1], ReplyDone)
    assert server.chat_bodies()[-1]["max_completion_tokens"] == 100
    assert backend.info.context_length == server.context_len


async def test_a_conversation_that_fills_the_context_is_one_line_and_sends_nothing(
    connect, build_report
):
    server = FakeSGLangServerDouble()
    backend = connect(server)
    await collect(backend.start())
    sent = len(server.chat_bodies())
    server.context_len = PROMPT_CHARS
    (error,) = await collect(backend.stream_reply(HELLO, SAMPLING))
    assert isinstance(error, ReplyError)
    assert f"fills the model's context ({PROMPT_CHARS} tokens)" in error.message
    assert len(server.chat_bodies()) == sent


async def test_a_server_that_cannot_count_gets_the_budget_as_asked(connect, build_report):
    server = FakeSGLangServerDouble()
    server.routes["/v1/tokenize"] = lambda _: httpx.Response(404, json={"detail": "Not Found"})
    backend = connect(server)
    await collect(backend.start())
    events = await collect(backend.stream_reply(HELLO, SAMPLING, thinking=Thinking(enabled=False)))
    assert isinstance(events[-1], ReplyDone)
    assert server.chat_bodies()[-1]["max_completion_tokens"] == SAMPLING.max_new_tokens


@pytest.mark.parametrize(
    "answer", [{"count": 10**30, "max_model_len": 4096}, {"count": 3, "max_model_len": -1}]
)
async def test_an_impossible_token_count_is_no_count_and_the_budget_stays_as_asked(
    connect, build_report, answer: dict[str, Any]
):
    server = FakeSGLangServerDouble()
    server.routes["/v1/tokenize"] = lambda _: httpx.Response(200, json=answer)
    backend = connect(server)
    await collect(backend.start())
    events = await collect(backend.stream_reply(HELLO, SAMPLING, thinking=Thinking(enabled=False)))
    assert isinstance(events[-1], ReplyDone)
    assert server.chat_bodies()[-1]["max_completion_tokens"] == SAMPLING.max_new_tokens
    assert backend.info.context_length is None
