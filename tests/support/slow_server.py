"""A test double of an SGLang server on 127.0.0.1 whose chat replies stream slowly.

Warm-up replies (`app.backend.warmup`'s question) end at once; a chat reply sends `TOKEN` every
`step_s` seconds until `/abort_request` names it, the client hangs up, its budget (then it is
cut, `length`) or `MAX_TOKENS`. A request that stops at `</think>` (a reply's thinking) thinks
nothing: it ends on that stop.
Run as a script it serves on the port given and prints its URL (for walking the app in tmux).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from app.backend.warmup import WARMUP_MESSAGES

TOKEN = "tok "
MAX_TOKENS = 3000
SERVER_INFO = {"version": "0.5.23", "model_path": "slow/test-model"}


def send_json(handler: BaseHTTPRequestHandler, answer: Any, status: int = 200) -> None:
    """A whole JSON answer, with its length."""
    data = json.dumps(answer).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class SlowServer:
    """The server's state: replies streamed so far, and the rids aborted."""

    def __init__(self, step_s: float = 0.05) -> None:
        self.step_s = step_s
        self.chat_tokens = 0
        """Tokens sent of chat (not warm-up) replies."""
        self.aborted: set[str] = set()
        self.requests = 0
        """Requests of any kind so far."""
        self.chat_bodies: list[dict[str, Any]] = []
        """The body of each chat request, in order."""
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.01,), daemon=True
        )  # polls for shutdown every 10 ms

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> SlowServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                server.requests += 1
                if self.path == "/server_info":
                    self._json(SERVER_INFO)
                else:
                    self._json({})

            def do_POST(self) -> None:
                server.requests += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if self.path == "/abort_request":
                    server.aborted.add(body["rid"])
                    self._json({})
                elif self.path == "/v1/chat/completions":
                    server.chat_bodies.append(body)
                    self._stream(body)
                else:
                    self._json({"error": "not here"}, 404)

            def _json(self, answer: Any, status: int = 200) -> None:
                send_json(self, answer, status)

            def _stream(self, body: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()  # no length: the stream ends when the connection closes
                self.close_connection = True
                if "</think>" in body.get("stop", []):  # the thinking request: none, the stop
                    self._event({}, "stop", 1, matched="</think>")
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                budget = body.get("max_completion_tokens", MAX_TOKENS)
                warm_up = body["messages"][0]["content"] == WARMUP_MESSAGES[0].content
                most = 2 if warm_up else min(budget, MAX_TOKENS)
                finish = "length" if not warm_up and most == budget else "stop"
                try:
                    for sent in range(1, most + 1):
                        if body["rid"] in server.aborted:
                            finish = "abort"
                            break
                        self._event({"content": TOKEN}, None, sent)
                        if not warm_up:
                            server.chat_tokens += 1
                            time.sleep(server.step_s)
                    self._event({}, finish, sent)
                    self.wfile.write(b"data: [DONE]\n\n")
                except OSError:
                    pass  # the client hung up

            def _event(
                self, delta: dict[str, str], finish: str | None, tokens: int, matched: str = ""
            ) -> None:
                choice = {"index": 0, "delta": delta, "finish_reason": finish}
                chunk = {
                    "choices": [choice | ({"matched_stop": matched} if matched else {})],
                    "usage": {"prompt_tokens": 5, "completion_tokens": tokens},
                }
                self.wfile.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


if __name__ == "__main__":
    with SlowServer(float(sys.argv[1]) if len(sys.argv) > 1 else 0.05) as running:
        print(running.url, flush=True)
        threading.Event().wait()
