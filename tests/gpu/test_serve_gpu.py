"""`ling-chat serve` on a real GPU; the remote client and the app chat with it over loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.backend.protocol import ReplyDone, TextChunk
from app.backend.remote.remote import RemoteBackend
from app.core.chat import ChatMessage, Role, Sampling
from tests.gpu import models
from tests.gpu.app_chat import MIN_ACCEPT, chat_through_app

pytest.importorskip("sglang", reason="needs SGLang")
pytestmark = pytest.mark.gpu
BOOT_S = 420


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(tmp_path: Path, *extra: str) -> tuple[subprocess.Popen[str], int, Path]:
    model = models.write_model_dir(tmp_path / "model", known_answer="random" not in extra)
    port = free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.gpu.serve_known_answer", str(model), str(port), *extra],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        text=True,
    )
    return proc, port, log


def wait_for(log: Path, proc: subprocess.Popen[str], text: str) -> str:
    deadline = time.monotonic() + BOOT_S
    while time.monotonic() < deadline:
        content = log.read_text(errors="replace")
        if text in content or proc.poll() is not None:
            return content
        time.sleep(1)
    return log.read_text(errors="replace")


async def test_served_stack_proves_itself_and_the_app_chats_over_http(tmp_path):
    proc, port, log = start_server(tmp_path)
    try:
        content = wait_for(log, proc, "ready: every optimization is engaged")
        print(content[content.find("ling-chat proof") :])
        assert "ready: every optimization is engaged" in content
        client = RemoteBackend(f"http://127.0.0.1:{port}")
        async for _stage in client.start():
            pass
        report = await client.proof()
        assert report.ok, report.summary()
        messages = [ChatMessage(Role.USER, "Hello over HTTP")]
        answer, done = "", None
        async for event in client.stream_reply(messages, Sampling(temperature=0.0)):
            if isinstance(event, TextChunk):
                answer += event.answer
            elif isinstance(event, ReplyDone):
                done = event
        await client.shutdown()
        assert done is not None
        print(
            f"remote reply: accept {done.usage.accept_length}, "
            f"{done.usage.completion_tokens} tokens"
        )
        assert answer.strip() == models.expected_reply()[1].strip()
        assert (done.usage.accept_length or 0.0) >= MIN_ACCEPT
        out = Path(os.environ.get("OUT") or tmp_path)
        await chat_through_app(
            RemoteBackend(f"http://127.0.0.1:{port}"),
            tmp_path / "history.db",
            ("Hello from the app",),
            out / "ui-remote-on-gpu.svg",
        )
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_served_random_weights_refuse_themselves(tmp_path):
    proc, _port, log = start_server(tmp_path, "random")
    try:
        proc.wait(timeout=BOOT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    content = log.read_text(errors="replace")
    print(content[content.find("ling-chat proof") :])
    assert proc.returncode == 2
    assert "refused to start" in content
