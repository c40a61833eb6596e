"""The stock server as `bench` drives it: started in a process group of its own, waited for
on `/health`, asked for one streamed `/generate` at a time, and stopped with its group.

`/generate` streams the same chunks as the in-process engine (SGLang's meta_info, with
`completion_tokens` and, at the end, `spec_verify_ct`), so its rows are measured alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from app.backend.remote.resident import last_line
from app.backend.resident import process
from app.backend.resident.spawn import free_port
from app.backend.sglang_meta import chunk_ending, chunk_tokens
from app.backend.wire import SSELines, WireError, parse_json
from app.bench.peer.recipe import RECIPE_FLAGS, PeerLaunch
from app.bench.protocol import BenchSample, EngineFactory
from app.core.errors import BackendError
from app.files import private_dir, private_file

POLL_S = 0.25
"""How often `/health` is asked while the server loads."""
STOP_GRACE_S = 30.0
"""How long the server's group has after SIGTERM before SIGKILL."""
CONNECT = 5.0
SERVER = "stock SGLang's server"
"""What its one-line errors call it (the table prefixes them with the peer's name)."""
GONE_S = 1.0
"""How long a failed request waits to see whether the server died."""
STEPS = int(dict(RECIPE_FLAGS)["--speculative-num-steps"] or 0)


class StockServer:
    """A started stock server behind the benchmark's `BenchEngine` protocol."""

    def __init__(
        self,
        launch: PeerLaunch,
        child: subprocess.Popen[bytes],
        argv: list[str],
        port: int,
        *,
        log_file: Path,
        wait_s: float,
    ) -> None:
        self.launch = launch
        self.child = child
        self.argv = argv
        self.url = f"http://127.0.0.1:{port}"
        self.log_file = log_file
        self.version = "unknown"
        """SGLang's version as `/server_info` states it."""
        self._tokenizer: Any = None
        """The model's tokenizer, loaded for the first prompt sent through its chat template."""
        # Reads wait as long as the start may: a long prompt's prefill precedes its first chunk.
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(wait_s, connect=CONNECT))

    async def _gone(self, when: str, within_s: float = 0.0) -> str | None:
        """One line once the server has exited (waiting up to `within_s` for it to be seen
        gone: a dying server closes its sockets first); None while it runs."""
        deadline = time.monotonic() + within_s
        while (status := self.child.poll()) is None:
            if time.monotonic() >= deadline:
                return None
            await asyncio.sleep(0.05)
        cause = last_line(self.log_file) or "its log is empty"
        return (
            f"{SERVER} (pid {self.child.pid}) exited {when} with status {status}: {cause} "
            f"(its log: {self.log_file})"
        )

    async def wait_ready(self, wait_s: float) -> None:
        """Until `/health` answers 200, then read its version from `/server_info`.

        Raises:
            BackendError: the server exited, or was not healthy within `wait_s` (one line).
        """
        deadline = time.monotonic() + wait_s
        while True:
            if gone := await self._gone("while starting"):
                raise BackendError(gone)
            with contextlib.suppress(httpx.HTTPError):
                answer = await self._client.get(f"{self.url}/health", timeout=POLL_S * 8)
                if answer.status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise BackendError(
                    f"{SERVER} was not healthy within {wait_s:g} s (--peer-wait); stopped it "
                    f"(its log: {self.log_file}: {last_line(self.log_file) or 'empty'})"
                )
            await asyncio.sleep(POLL_S)
        with contextlib.suppress(httpx.HTTPError, WireError):
            info = parse_json((await self._client.get(f"{self.url}/server_info")).content, "info")
            if isinstance(info, dict) and isinstance(info.get("version"), str):
                self.version = info["version"]

    async def generate(
        self,
        *,
        input_ids: list[int] | None,
        prompt: str | None,
        sampling_params: dict[str, Any],
        chat_template: Mapping[str, Any] | None = None,
    ) -> BenchSample:
        if prompt is not None and chat_template is not None:
            prompt = self._chat_prompt(prompt, chat_template)
        body: dict[str, Any] = {"sampling_params": sampling_params, "stream": True}
        body.update({"input_ids": input_ids} if input_ids is not None else {"text": prompt})
        started = time.perf_counter()
        arrivals: list[float] = []
        chunk: dict[str, Any] = {}
        tokens, done = 0, False
        try:
            async with self._client.stream("POST", f"{self.url}/generate", json=body) as answer:
                if answer.status_code != 200:
                    text = (await answer.aread()).decode("utf-8", "replace")
                    raise BackendError(f"{SERVER} answered HTTP {answer.status_code}: {text[:200]}")
                lines = SSELines()
                async for data in answer.aiter_bytes():
                    now = time.perf_counter()
                    for line in lines.feed(data):
                        if not line.startswith("data:"):
                            continue
                        if (payload := line[5:].strip()) == "[DONE]":
                            done = True
                            break
                        chunk = _chunk(payload)
                        if (count := chunk_tokens(chunk)) > tokens:
                            tokens = count
                            arrivals.append(now)
                    if done:
                        break
        except (httpx.HTTPError, WireError) as exc:
            failure = f"{SERVER}: {type(exc).__name__}: {exc}"
            raise BackendError(await self._gone("mid-run", GONE_S) or failure) from exc
        if not done:
            failure = f"{SERVER}'s stream ended without [DONE]"
            raise BackendError(await self._gone("mid-run", GONE_S) or failure)
        usage, finish = chunk_ending(chunk)
        return BenchSample(
            started, arrivals, str(chunk.get("text", "")), usage, finish, time.perf_counter()
        )

    def _chat_prompt(self, prompt: str, template: Mapping[str, Any]) -> str:
        """One user message through the model's own chat template, as the engine renders it."""
        from app.backend.engine.reply import chat_prompt
        from app.core.chat import ChatMessage, Role

        try:
            if self._tokenizer is None:
                from transformers import AutoTokenizer

                self._tokenizer = AutoTokenizer.from_pretrained(self.launch.model_path)
            return chat_prompt(self._tokenizer, [ChatMessage(Role.USER, prompt)], **template)
        except Exception as exc:  # transformers missing, or the model's Jinja template
            raise BackendError(f"cannot apply the chat template: {exc}") from exc

    async def start_profile(self, folder: Path) -> None:
        body = {"output_dir": str(folder), "activities": ["GPU"], "with_stack": False}
        await self._post("/start_profile", {**body, "profile_prefix": "host"})

    async def stop_profile(self) -> None:
        await self._post("/stop_profile", None)

    async def _post(self, path: str, body: dict[str, Any] | None) -> None:
        """POST `path`; anything but 200 is one line."""
        try:
            answer = await self._client.post(f"{self.url}{path}", json=body)
        except httpx.HTTPError as exc:
            raise BackendError(f"{SERVER} {path}: {type(exc).__name__}: {exc}") from exc
        if answer.status_code != 200:
            raise BackendError(f"{SERVER} {path}: HTTP {answer.status_code}: {answer.text[:200]}")

    def describe(self) -> dict[str, Any]:
        config_file = Path(self.launch.model_path).expanduser() / "config.json"
        return {
            "config": {
                "peer": self.launch.label(self.version),
                "argv": self.argv,
                "sglang": self.version,
                "speculative_num_steps": STEPS,  # the roofline's round
            },
            "proof": None,
            "model_config": json.loads(config_file.read_text()) if config_file.is_file() else None,
        }

    async def shutdown(self) -> None:
        await self._client.aclose()
        await asyncio.to_thread(stop_group, self.child, STOP_GRACE_S)


def _chunk(payload: str) -> dict[str, Any]:
    """One `data:` line's JSON; an error the server streamed is raised as one line."""
    chunk = parse_json(payload, f"a chunk of {SERVER}'s stream")
    if not isinstance(chunk, dict):
        raise WireError(f"a chunk of {SERVER}'s stream is not an object")
    if (error := chunk.get("error")) is not None:
        message = error.get("message") if isinstance(error, dict) else error
        raise BackendError(f"{SERVER} refused the request: {message}")
    return chunk


def stop_group(child: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to the server's whole group (SGLang's scheduler and detokenizer with it),
    SIGKILL to what is left of it after `grace_s`; the server reaped."""
    for signum, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)
        if _group_ended(child, wait_s):
            break
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout=5.0)


def _group_ended(child: subprocess.Popen[bytes], wait_s: float) -> bool:
    """Whether every process of the server's group is gone within `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        child.poll()  # reaps the leader: a zombie counts as gone
        if not any(process.alive(pid) for pid in process.group(child.pid)):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def peer_factory(
    launch: PeerLaunch, *, log_file: Path, wait_s: float, inherited: Mapping[str, str]
) -> EngineFactory:
    """The peer's name -> the stock server, started and healthy (stopped again if not);
    `inherited`: the variables it starts from (`PeerLaunch.environment`)."""

    async def start(_name: str) -> StockServer:
        port = free_port()
        argv = launch.argv(port)
        try:
            private_dir(log_file.parent)
            private_file(log_file)
            fd = os.open(log_file, os.O_WRONLY | os.O_APPEND)
        except OSError as exc:
            raise BackendError(f"cannot write {SERVER}'s log {log_file}: {exc.strerror}") from exc
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=fd,
                env=launch.environment(inherited),
                start_new_session=True,
            )
        except OSError as exc:
            raise BackendError(f"cannot start {SERVER}: {exc}") from exc
        finally:
            os.close(fd)
        server = StockServer(launch, child, argv, port, log_file=log_file, wait_s=wait_s)
        try:
            await server.wait_ready(wait_s)
        except BaseException:
            await server.shutdown()
            raise
        return server

    return start
