"""Whole answers from an SGLang server, each read within its size limit, and one-line
messages for what went wrong. Source paths are relative to the `sglang/srt/` package of the
0.5.23 wheel."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from app.backend.wire import WireError, parse_json
from app.core.errors import BadServerAnswer, ServerError
from app.core.server_wait import DEFAULT_SERVER_WAIT_S, WAIT_HINT

REQUEST_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
"""For /health (up to 20 s of SGLang's own check), /server_info and /abort_request: each
read; the whole answer has the server wait (`app.core.server_wait`)."""

HEALTH_LIMIT = 64 << 10
"""The most bytes read of a `/health` answer (SGLang's is empty) or of an error's body."""
SERVER_INFO_LIMIT = 4 << 20
"""The most bytes read of `/server_info` (SGLang's is about 20 KB with the proof)."""
TOKENIZE_LIMIT = 16 << 20
"""The most bytes read of `/v1/tokenize`, whose answer lists every token of the prompt."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A whole answer, read within its size limit."""

    status: int
    body: bytes
    content_type: str


class ServerHttp:
    """Requests to one SGLang server, with its API key, read within their size limits."""

    def __init__(
        self,
        base_url: str,
        client: httpx.AsyncClient,
        api_key: str | None,
        wait_s: float = DEFAULT_SERVER_WAIT_S,
    ) -> None:
        self.base_url = base_url
        self.client = client
        self.wait_s = wait_s
        """The longest any one answer may take, however it trickles in."""
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._api_key_given = api_key is not None

    def url(self, path: str) -> str:
        """The full URL of `path` on this server."""
        return f"{self.base_url}{path}"

    async def get(self, path: str, limit: int = HEALTH_LIMIT) -> Answer:
        answer = await self.request("GET", path, limit)
        if answer.status != 200:
            raise ServerError(self.status_message(answer, f"GET {path}"))
        return answer

    async def request(
        self, method: str, path: str, limit: int, body: Mapping[str, Any] | None = None
    ) -> Answer:
        """One request's whole answer, at most `limit` bytes of it.

        Raises:
            ServerError: the request failed below HTTP, or the whole answer took longer
                than `wait_s`.
            BadServerAnswer: the answer is longer than `limit`.
        """
        what = f"{method} {path}"
        try:
            async with (
                asyncio.timeout(self.wait_s),
                self.client.stream(
                    method, self.url(path), json=body, headers=self.headers, timeout=REQUEST_TIMEOUT
                ) as response,
            ):
                return Answer(
                    response.status_code,
                    await self.read_body(response, limit, what),
                    response.headers.get("content-type", "no content type").split(";")[0],
                )
        except TimeoutError:
            raise ServerError(self.overdue(f"the answer to {what}")) from None
        except httpx.HTTPError as exc:
            raise ServerError(self.transport_message(exc, what, REQUEST_TIMEOUT)) from exc

    def overdue(self, what: str) -> str:
        """One line for a wait past `wait_s`."""
        return (
            f"{self.base_url} did not send {what} within {self.wait_s:g} s "
            f"(the server wait: {WAIT_HINT})"
        )

    async def read_body(self, response: httpx.Response, limit: int, what: str) -> bytes:
        """The body, read in pieces and refused as soon as it passes `limit` bytes."""
        body = bytearray()
        async for data in response.aiter_bytes():
            body += data
            if len(body) > limit:
                raise BadServerAnswer(
                    f"{self.base_url} sent more than {_size(limit)} for {what}: "
                    "not an SGLang answer"
                )
        return bytes(body)

    def parse(self, answer: Answer, what: str) -> Any:
        """The answer's JSON; one line when it is not JSON or nests too deep."""
        try:
            return parse_json(answer.body, f"the answer to {what}")
        except WireError as exc:
            raise BadServerAnswer(f"{self.base_url} sent a broken answer: {exc}") from None

    async def read_server_info(self) -> dict[str, Any]:
        """`GET /server_info`, checked to be SGLang's."""
        answer = await self.get("/server_info", SERVER_INFO_LIMIT)
        not_sglang = f"{self.base_url} is not an SGLang server: GET /server_info returned"
        if answer.content_type != "application/json" and not answer.body.lstrip().startswith(
            (b"{", b"[")
        ):
            raise ServerError(f"{not_sglang} {answer.content_type}, not JSON")
        info = self.parse(answer, "GET /server_info")
        if not (
            isinstance(info, dict) and isinstance(info.get("version"), str) and "model_path" in info
        ):
            raise ServerError(f"{not_sglang} JSON without SGLang's 'version' and 'model_path'")
        return info

    async def error_answer(self, response: httpx.Response, what: str) -> Answer:
        """A non-200 answer; a body past `HEALTH_LIMIT` is left unread (no detail)."""
        try:
            body = await self.read_body(response, HEALTH_LIMIT, what)
        except BadServerAnswer:
            body = b""
        return Answer(response.status_code, body, "")

    def status_message(self, answer: Answer, what: str) -> str:
        """One line for a non-200 answer (401/403 come from `utils/auth.py:192-204`)."""
        code = answer.status
        if code == 401 and self._api_key_given:
            return f"{self.base_url} rejected the API key (HTTP 401 on {what}): check the key"
        if code == 401:
            return f"{self.base_url} requires an API key (HTTP 401 on {what}): pass one"
        if code == 403:
            return f"{self.base_url} refused the API key (HTTP 403 on {what}): wrong key?"
        if code == 404:
            return f"{self.base_url} is not an SGLang server ({what}: HTTP 404)"
        if code == 503 and what == "GET /health":
            return f"{self.base_url} is not ready (HTTP 503 on {what}): still loading or unhealthy"
        return f"{what} to {self.base_url} failed: HTTP {code}{_error_detail(answer.body)}"

    def transport_message(self, exc: httpx.HTTPError, what: str, timeout: httpx.Timeout) -> str:
        """One line for a failure below HTTP: refused, timed out, cut off."""
        if isinstance(exc, httpx.ConnectTimeout):
            return f"timed out connecting to {self.base_url} after {timeout.connect:g} s ({what})"
        if isinstance(exc, httpx.ReadTimeout):
            return (
                f"{self.base_url} sent nothing for {timeout.read:g} s ({what}): "
                "the server is stuck or overloaded"
            )
        if isinstance(exc, httpx.ConnectError):
            reason = _one_line(str(exc)) or "connection failed"
            return f"cannot connect to {self.base_url} ({what}): {reason}"
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            return f"{self.base_url} closed the connection ({what}): the server may have died"
        return f"{what} to {self.base_url} failed: {type(exc).__name__}: {_one_line(str(exc))}"


def is_loopback(host: str) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _error_detail(text: bytes) -> str:
    """`: message` from an SGLang error body (`serving_base.py:205-221`), else ''."""
    try:
        body = parse_json(text, "an error")
    except WireError:
        return ""
    message = (body.get("message") or body.get("error")) if isinstance(body, dict) else None
    if isinstance(message, dict):
        message = message.get("message")
    return f": {_one_line(str(message))}" if message else ""


def _size(limit: int) -> str:
    """A byte limit for people: 64 KiB, 4 MiB."""
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"
