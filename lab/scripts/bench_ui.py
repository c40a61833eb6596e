"""How far the chat UI falls behind a fast reply, and what it costs in CPU per token.

Streams a long synthetic reply (Markdown with code blocks and tables) at a fixed rate
through the real app, headless, from a replayed trace, and prints:

- lag: for each chunk, when the answer widget had drawn it minus when the backend
  produced it; the last chunk's lag, the 95th percentile and the worst;
- CPU: the process time spent during the reply, and divided by the tokens.

    python lab/scripts/bench_ui.py            # 500 tok/s, 3 and 1 tokens per chunk, ~20 KiB
    python lab/scripts/bench_ui.py --tps 500 200 50 --tokens-per-chunk 3 --kib 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.await_complete import AwaitComplete
from textual.widgets import Markdown, TextArea

from app.backend.protocol import ReplyEvent, TextChunk
from app.backend.replay import ReplayBackend
from app.backend.trace import TRACE_FORMAT, TRACE_VERSION
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.core.reply_usage import ReplyUsage
from app.files import write_atomic
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.chat import ChatScreen
from app.ui.widgets.messages import ReplyView

SECTION = """## Step {n}: parsing the input

The parser reads the file **line by line**, keeps a small state machine and reports
errors with their line number. Each step below builds on the previous one, so read
them in order; `parse()` is the entry point and `Token` the unit it yields.

```python
from dataclasses import dataclass


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    line: int


def parse(lines: list[str]) -> list[Token]:
    tokens: list[Token] = []
    for number, line in enumerate(lines, start=1):
        for word in line.split():
            kind = "number" if word.isdigit() else "word"
            tokens.append(Token(kind, word, number))
    return tokens
```

| input        | tokens | time   |
|--------------|--------|--------|
| `a 1 b`      | 3      | 0.1 ms |
| 10,000 lines | 52,113 | 41 ms  |

1. Split each line on whitespace.
2. Classify every word.
3. Keep the line number for error messages.

"""


def reply_markdown(kib: float) -> str:
    """About `kib` KiB of Markdown: headings, prose, code blocks, tables and lists."""
    parts: list[str] = []
    while sum(map(len, parts)) < kib * 1024:
        parts.append(SECTION.format(n=len(parts) + 1))
    return "".join(parts)


def synthetic_trace(text: str, tps: float, tokens_per_chunk: int) -> dict[str, Any]:
    """A one-reply trace streaming `text` at `tps` tokens/s, ~4 characters a token."""
    pieces = re.findall(r".{1,4}", text, flags=re.DOTALL)
    events: list[dict[str, Any]] = []
    ttft = 0.05
    for index in range(0, len(pieces), tokens_per_chunk):
        tokens = min(index + tokens_per_chunk, len(pieces))
        events.append(
            {
                "type": "chunk",
                "t": ttft + index / tps,
                "answer": "".join(pieces[index:tokens]),
                "reasoning": "",
                "completion_tokens": tokens,
            }
        )
    verify = -(-len(pieces) // tokens_per_chunk)
    usage = ReplyUsage(completion_tokens=len(pieces), prompt_tokens=20, verify_rounds=verify)
    end = ttft + len(pieces) / tps
    events.append({"type": "done", "t": end, "finish_reason": "stop", "usage": usage.to_dict()})
    line = ProofLine("bench", "synthetic trace", Verdict.PASS, "bench_ui.py")
    return {
        "format": TRACE_FORMAT,
        "version": TRACE_VERSION,
        "recorded_at": "",
        "info": {
            "kind": "bench",
            "model": "synthetic",
            "sglang_version": "-",
            "profile": "stack",
            "speculative": True,
        },
        "stages": [],
        "proof": ProofReport("stack", (line,)).to_dict(),
        "replies": [{"request": {"messages": [], "sampling": {}}, "events": events}],
    }


@dataclass(frozen=True)
class Result:
    """What one run measured."""

    tokens: int
    chunks: int
    produce_s: float
    last_lag_s: float
    max_lag_s: float
    p95_lag_s: float
    cpu_s: float


class Watch:
    """Times when the backend produced each chunk and when the answer widget showed it."""

    def __init__(self) -> None:
        self.produced: list[tuple[float, int]] = []
        """(perf_counter, answer characters so far) per chunk."""
        self.drawn: list[tuple[float, int]] = []
        """(perf_counter, characters in the answer widget) per completed append."""

    def install(self) -> None:
        """Record every completed append to an answer widget, and the end of the reply."""
        append, finish = Markdown.append, ReplyView.finish
        drawn = self.drawn

        def timed_append(widget: Markdown, markdown: str) -> AwaitComplete:
            pending: Awaitable[None] = append(widget, markdown)

            async def timed() -> None:
                await pending
                if widget.has_class("answer"):
                    drawn.append((time.perf_counter(), len(widget.source)))

            return AwaitComplete(timed())

        async def timed_finish(view: ReplyView, footer: str) -> None:
            await finish(view, footer)
            drawn.append((time.perf_counter(), len(view.answer)))

        Markdown.append = timed_append  # type: ignore[method-assign,assignment]
        ReplyView.finish = timed_finish  # type: ignore[method-assign,assignment]

    def lags(self) -> list[float]:
        """Per chunk: when it was first fully drawn minus when it was produced."""
        lags, index = [], 0
        for produced_at, size in self.produced:
            while index < len(self.drawn) and self.drawn[index][1] < size:
                index += 1
            drawn_at = self.drawn[index][0] if index < len(self.drawn) else float("nan")
            lags.append(drawn_at - produced_at)
        return lags


class WatchedReplay(ReplayBackend):
    """The replay backend, noting each chunk as it is produced."""

    def __init__(self, path: Path, watch: Watch) -> None:
        super().__init__(path)
        self._watch = watch

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        """The replayed reply, each chunk noted with the answer size so far."""
        size = 0
        async for event in super().stream_reply(
            messages, sampling, thinking=thinking, partial=partial
        ):
            if isinstance(event, TextChunk):
                size += len(event.answer)
                self._watch.produced.append((event.at, size))
            yield event


async def run_once(tps: float, tokens_per_chunk: int, kib: float, refresh_hz: float) -> Result:
    """Stream one synthetic reply through the headless app and measure it."""
    trace = synthetic_trace(reply_markdown(kib), tps, tokens_per_chunk)
    watch = Watch()
    watch.install()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trace.json"
        write_atomic(path, [json.dumps(trace)], replace=True)
        with ChatStore.open(Path(folder) / "history.db") as store:
            app = LingChatApp(
                WatchedReplay(path, watch),
                store,
                sampling=Sampling(),
                proof_hold_s=0,
                refresh_hz=refresh_hz,
            )
            async with app.run_test(headless=True, size=(120, 40)) as pilot:
                while not isinstance(app.screen, ChatScreen):
                    await pilot.pause(0.01)
                screen = app.screen
                await pilot.pause()
                screen.query_one("#prompt", TextArea).load_text("Explain the parser.")
                cpu_before = time.process_time()
                await pilot.press("ctrl+s")
                # Plain sleeps: Pilot.pause() visits every widget, which would cost CPU too.
                while screen.run is not None:
                    await asyncio.sleep(0.05)
                cpu_s = time.process_time() - cpu_before
    lags = watch.lags()
    events = trace["replies"][0]["events"]
    return Result(
        tokens=events[-1]["usage"]["completion_tokens"],
        chunks=len(events) - 1,
        produce_s=watch.produced[-1][0] - watch.produced[0][0],
        last_lag_s=lags[-1],
        max_lag_s=max(lags),
        p95_lag_s=statistics.quantiles(lags, n=20)[-1],
        cpu_s=cpu_s,
    )


def main() -> None:
    """Parse the flags, run, print one line per configuration."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tps", type=float, nargs="+", default=[500.0], help="tokens/s")
    parser.add_argument("--tokens-per-chunk", type=int, nargs="+", default=[3, 1])
    parser.add_argument("--kib", type=float, default=20.0, help="reply size in KiB")
    parser.add_argument("--refresh-hz", type=float, default=15.0, help="UI draw rate")
    args = parser.parse_args()
    print(f"reply ~{args.kib:g} KiB of Markdown, UI draws at {args.refresh_hz:g} Hz")
    print(
        f"{'tok/s':>6} {'tok/chunk':>9} {'tokens':>6} {'chunks':>6} {'stream s':>8} "
        f"{'last lag':>9} {'p95 lag':>8} {'max lag':>8} {'CPU s':>6} {'CPU/token':>10}"
    )
    for tps in args.tps:
        for per_chunk in args.tokens_per_chunk:
            r = asyncio.run(run_once(tps, per_chunk, args.kib, args.refresh_hz))
            print(
                f"{tps:>6g} {per_chunk:>9} {r.tokens:>6} {r.chunks:>6} {r.produce_s:>8.2f} "
                f"{r.last_lag_s * 1000:>7.0f}ms {r.p95_lag_s * 1000:>6.0f}ms "
                f"{r.max_lag_s * 1000:>6.0f}ms {r.cpu_s:>6.2f} {r.cpu_s / r.tokens * 1e6:>8.0f}µs"
            )


if __name__ == "__main__":
    main()
