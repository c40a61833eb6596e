"""RemoteBackend: chat with a running SGLang 0.5.23 server over HTTP.

Source paths are relative to the `sglang/srt/` package of the 0.5.23 wheel.

Endpoint choice. Replies stream from `POST /v1/chat/completions`
(`entrypoints/http_server.py:1870-1879`), not from the native `/generate`:
- `/generate` takes raw `text` or `input_ids` (`http_server.py:928-990`) and the server
  offers no endpoint that renders the chat template alone, so the client would have to
  ship Ling's tokenizer and template; the chat endpoint applies the server's own template
  and splits thinking from the answer with the server's reasoning parser (`ling3` for
  Ling-3.0), giving `reasoning_content` deltas (`openai/serving_chat.py:973-1001`).
- It loses nothing: with `return_spec_tokens_details` the final speculative statistics
  (present only once the request finished, `managers/tokenizer_manager.py:2753-2754`)
  come back in a last `sglext.spec_tokens_details` chunk (`serving_chat.py:2513-2516,
  2703-2764`), and `stream_options.continuous_usage_stats` puts the cumulative token count
  on every chunk. `wire.py` reads both into the reply's `ReplyUsage`.
- It works the same on a plain SGLang server.

Start-up: `GET /health` (never needs the API key, `utils/auth.py:101-105`; may run a
one-token generation for up to 20 s, `http_server.py:218, 721-799`), then
`GET /server_info` (`http_server.py:863-890`), then the warm-up (`warmup.py`): a short
greedy reply whose accept length feeds the proof, and a sampled one. The server
info JSON is the resolved server args with `scheduler_infos[0]` merged in at the top
level (`utils/common.py:3584-3593`, `http_server.py:2857-2861`), so ling-chat's patched
scheduler's `get_init_info()` evidence is read from the top-level key `"ling_chat_proof"`.

Stop: `POST /abort_request {"rid": ...}` (`http_server.py:1721-1731`) makes the server end
the stream with `finish_reason: "abort"` and its final statistics; if it does not within
`STOP_GRACE_S`, the connection is closed (SGLang then aborts the request itself 2 s later,
`managers/tokenizer_manager.py:2427-2438`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import unicodedata
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import httpx

from app.backend.draft import count, draft_in_use
from app.backend.proof import PROOF_KEY, build_report
from app.backend.protocol import (
    BackendInfo,
    LoadStage,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
)
from app.backend.remote.http import (
    HEALTH_LIMIT,
    TOKENIZE_LIMIT,
    ServerHttp,
    is_loopback,
)
from app.backend.remote.phases import RemotePlan, Request
from app.backend.remote.stream import RemoteReply, read_reply
from app.backend.thinking import END_THINK, ThinkingSplit
from app.backend.warmup import PLAN, warm_up
from app.backend.wire import (
    TooDeep,
    WireError,
    chat_request,
    parse_json,
    prompt_size,
    tokenize_request,
)
from app.core.chat import (
    DEFAULT_THINKING,
    ChatMessage,
    PartialReply,
    Sampling,
    Thinking,
    fit_to_context,
)
from app.core.errors import (
    BackendError,
    BadServerAnswer,
    ConfigError,
    ContextFull,
    ProofFailed,
    ServerError,
)
from app.core.proof_report import ProofReport
from app.core.reply_usage import ReplyUsage
from app.core.server_wait import DEFAULT_SERVER_WAIT_S
from app.levers.checks.accept_length import DEFAULT_MIN as DEFAULT_MIN_ACCEPT_LENGTH
from app.levers.profiles import DEFAULT_PROFILE, PROFILES

logger = logging.getLogger(__name__)

STOP_GRACE_S = 2.0
"""How long `stop_reply` waits for the server to end an aborted stream itself."""
MAX_MODEL_NAME = 200
"""The longest model name kept from a server (a checkpoint path is far shorter)."""


def model_name(server_info: Mapping[str, Any]) -> str:
    """The model a server reports (its `model_path`, else its served name), as a name fit to
    store and show: control and format characters dropped, spaces collapsed, at most
    MAX_MODEL_NAME characters; '' when it reports none."""
    for key in ("model_path", "served_model_name"):
        value = server_info.get(key)
        if isinstance(value, str):
            printable = "".join(c for c in value if not unicodedata.category(c).startswith("C"))
            name = " ".join(printable.split())
            if name:
                return name if len(name) <= MAX_MODEL_NAME else name[: MAX_MODEL_NAME - 1] + "…"
    return ""


class RemoteBackend:
    """A `ChatBackend` for an SGLang server at `base_url` (`kind="server"`).

    `start()` raises `ServerError` when the server cannot be used and `ProofFailed` when
    an optimization is not proven; `proof()` then still returns the report. With
    `allow_unoptimized=True` start-up succeeds anyway: the UI learns it from
    `(await backend.proof()).ok` being False (the last `proof` stage says so too).
    `warnings` holds what the UI should show before chatting (e.g. plain HTTP across
    the network).
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        client: httpx.AsyncClient | None = None,
        min_accept_length: float = DEFAULT_MIN_ACCEPT_LENGTH,
        allow_unoptimized: bool = False,
        profile: str = DEFAULT_PROFILE,
        server_wait: float = DEFAULT_SERVER_WAIT_S,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ConfigError(f"server URL must be http:// or https://HOST[:PORT]: {base_url!r}")
        if profile not in PROFILES:
            raise ConfigError(f"unknown profile {profile!r}: one of {', '.join(PROFILES)}")
        self.base_url = base_url.rstrip("/")
        self.min_accept_length = min_accept_length
        self.allow_unoptimized = allow_unoptimized
        self.profile = profile
        self.warnings: list[str] = []
        if url.scheme == "http" and not is_loopback(url.host):
            self.warnings.append(
                f"plain http:// to {url.host}: prompts, replies and the API key cross the "
                "network unencrypted (use https:// or an SSH tunnel)"
            )
            logger.warning(self.warnings[-1])
        self._owns_client = client is None
        self._http = ServerHttp(
            self.base_url,
            client if client is not None else httpx.AsyncClient(),
            api_key,
            server_wait,
        )
        self._server_info: Mapping[str, Any] = {}
        self._report: ProofReport | None = None
        self._context_length: int | None = None
        """The context size the server last reported (`/v1/tokenize`)."""
        self._reply: RemoteReply | None = None
        self._stopped = False
        """The reply in flight was stopped: no request of it follows."""
        self._matched_stop: str | int | None = None
        """The stop the last request ended on."""

    @property
    def server_wait(self) -> float:
        """The longest one answer, first token or next token may take (`server_wait`)."""
        return self._http.wait_s

    @property
    def info(self) -> BackendInfo:
        """What the server runs; model and version stay empty until `start()` read them."""
        server = self._server_info
        return BackendInfo(
            kind="server",
            model=model_name(server),
            sglang_version=str(server.get("version") or ""),
            profile=self.profile,
            speculative=bool(server.get("speculative_algorithm")),
            context_length=self._context_length,
            draft=draft_in_use(server.get(PROOF_KEY), server),
        )

    async def start(self) -> AsyncIterator[LoadStage]:
        """Connect, read the server info, warm up, judge the proof."""
        began = time.perf_counter()

        def stage(name: str, done: bool, detail: str = "") -> LoadStage:
            return LoadStage(name, done, time.perf_counter() - began, detail)

        waits = f"waits up to {self.server_wait:g} s"
        yield stage("connect", False, f"{self.base_url} ({waits})")
        await self._http.get("/health")
        yield stage("connect", True, "; ".join(self.warnings) or "server is up")

        yield stage("server info", False)
        self._server_info = server = await self._http.read_server_info()
        algorithm = server.get("speculative_algorithm") or "off"
        model = model_name(server) or "no model named"
        yield stage(
            "server info", True, f"SGLang {server['version']}, {model}, speculative {algorithm}"
        )

        yield stage("warm-up", False, f"{PLAN}; {waits} a token")
        accept = await warm_up(self, ServerError)
        yield stage(
            "warm-up",
            True,
            "no speculative stats" if accept is None else f"accept length {accept:.2f}",
        )

        yield stage("proof", False)
        facts = server.get(PROOF_KEY)
        # A plain server has no proof: every lever is judged on empty facts and fails.
        self._report = report = build_report(
            facts if isinstance(facts, dict) else {},
            profile=self.profile,
            min_accept_length=self.min_accept_length,
            warmup_accept_length=accept,
        )
        if not report.ok and not self.allow_unoptimized:
            why = (
                ", ".join(line.title for line in report.failed)
                if isinstance(facts, dict)
                else f"it publishes no {PROOF_KEY} (a server not started by ling-chat)"
            )
            raise ProofFailed(
                f"{self.base_url} is not proven optimized ({report.summary()}): {why}; "
                "start it with `ling-chat serve`, or chat anyway with --allow-unoptimized"
            )
        yield stage(
            "proof",
            True,
            report.summary() if report.ok else f"{report.summary()}: unproven, chatting anyway",
        )

    async def proof(self) -> ProofReport:
        """The report judged by `start()`, also after it raised `ProofFailed`."""
        if self._report is None:
            raise BackendError("proof() needs start() to have reached the proof stage")
        return self._report

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        """Stream one reply, the thinking held to its budget (phases.py); the last event
        is a `ReplyDone` or a `ReplyError`."""
        try:
            room = await self._room(messages)
            if room is not None:
                fit_to_context(sampling, *room)  # raises ContextFull when no room is left
        except (BadServerAnswer, ContextFull) as exc:
            yield ReplyError(str(exc), time.perf_counter())
            return
        left = None if room is None else room[1] - room[0]
        plan = RemotePlan(messages, sampling, thinking, partial, left)
        request: Request | None = plan.first()
        usage: ReplyUsage | None = None
        self._stopped = False
        while request is not None:
            split = ThinkingSplit() if request.thinking else None
            thought, done, base = "", None, usage.completion_tokens if usage else 0
            async for event in self._one_request(plan, request):
                if isinstance(event, ReplyError):
                    yield event
                    return
                if isinstance(event, ReplyDone):
                    done, tokens = event, event.usage.completion_tokens
                    reasoning, answer = split.end() if split else ("", "")
                else:
                    tokens = event.completion_tokens
                    if event.reasoning:  # a server that splits the thinking itself
                        split = None
                    reasoning, answer = split.feed(event.answer) if split else ("", event.answer)
                    reasoning = event.reasoning + reasoning
                thought += reasoning
                if reasoning or answer:
                    yield TextChunk(answer, reasoning, base + tokens, event.at)
            assert done is not None  # _one_request ends on a Done or an Error
            usage = done.usage if usage is None else usage.then(done.usage)
            last, request = request, None
            if split and not split.closed and not self._stopped:
                tokens = done.usage.completion_tokens
                request = plan.next(last, done.finish_reason, self._matched_stop, thought, tokens)
            if request is None:
                cut_by = last.limit if done.finish_reason == "length" else ""
                yield replace(done, usage=usage, cut_by=cut_by)

    async def _one_request(self, plan: RemotePlan, request: Request) -> AsyncIterator[ReplyEvent]:
        """Stream one chat request; the last event is a `ReplyDone` or a `ReplyError`."""
        reply = RemoteReply(rid=f"ling-chat-{uuid.uuid4().hex}")
        model = str(self._server_info.get("served_model_name") or "default")
        body = chat_request(
            plan.messages,
            plan.sampling,
            model=model,
            rid=reply.rid,
            max_tokens=request.max_tokens,
            enable_thinking=plan.enable_thinking,
            prefix=request.prefix,
            stop=END_THINK if request.thinking else None,
        )
        reply.task = asyncio.create_task(read_reply(self._http, reply, body))
        reply.task.add_done_callback(lambda _: reply.events.put_nowait(None))
        self._reply = reply
        try:
            while True:
                event = await reply.events.get()
                if event is None:  # the reader ended without a last event: it crashed
                    reply.task.result()
                    return
                yield event
                if not isinstance(event, TextChunk):
                    self._matched_stop = reply.stream.matched_stop
                    return
        finally:
            if self._reply is reply:
                self._reply = None
            reply.task.cancel()
            await asyncio.gather(reply.task, return_exceptions=True)

    async def stop_reply(self) -> None:
        """Abort the reply in flight; its stream ends with `ReplyDone("abort")`."""
        self._stopped = True  # no request after this one
        reply = self._reply
        if reply is None or reply.task is None or reply.task.done():
            return
        reply.stopping = True
        if await self._abort_on_server(reply.rid):
            await asyncio.wait({reply.task}, timeout=STOP_GRACE_S)
        reply.task.cancel()  # no-op when the server ended the stream itself
        await asyncio.gather(reply.task, return_exceptions=True)

    async def shutdown(self) -> None:
        """End any reply in flight and close the HTTP client if this backend made it."""
        reply = self._reply
        if reply is not None and reply.task is not None:
            reply.stopping = True
            reply.task.cancel()
            await asyncio.gather(reply.task, return_exceptions=True)
        if self._owns_client:
            await self._http.client.aclose()

    async def _room(self, messages: Sequence[ChatMessage]) -> tuple[int, int] | None:
        """(context tokens the prompt takes, context size); None when the server cannot say.

        The server counts the prompt (`/v1/tokenize`); the draft-token slots SGLang reserves
        per request under speculation (`managers/utils.py:484-500`) count as taken.
        """
        what = "POST /v1/tokenize"
        try:
            answer = await self._http.request(
                "POST", "/v1/tokenize", TOKENIZE_LIMIT, tokenize_request(messages)
            )
            if answer.status != 200:
                return None
            used, context = prompt_size(parse_json(answer.body, f"the answer to {what}"))
            self._context_length = context
        except TooDeep as exc:
            raise BadServerAnswer(f"{self.base_url} sent a broken answer: {exc}") from None
        except BadServerAnswer:
            raise
        except (ServerError, WireError) as exc:
            logger.warning("cannot count the prompt's tokens at %s: %s", self.base_url, exc)
            return None
        info = self._server_info
        reserved = 0
        if info.get("speculative_algorithm"):
            topk, steps, tokens = (
                count(info.get(f"speculative_{name}")) or 0
                for name in ("eagle_topk", "num_steps", "num_draft_tokens")
            )
            reserved = max(topk * steps, tokens)
        return used + reserved, context

    async def _abort_on_server(self, rid: str) -> bool:
        """POST /abort_request; False when the server did not take it."""
        try:
            answer = await self._http.request("POST", "/abort_request", HEALTH_LIMIT, {"rid": rid})
        except ServerError as exc:
            logger.warning("abort_request for %s failed: %s", rid, exc)
            return False
        return answer.status == 200
