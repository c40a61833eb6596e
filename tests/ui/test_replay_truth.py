"""A replayed reply shows and stores the recording's speed, at any terminal size and speed.

The expected numbers are computed here from the shipped trace file alone (its chunks' `t`
and token counts, its final usage), not through the app's telemetry; the app runs for real
(Pilot, the real replay clock, a real SQLite history), and what it shows is read off the
screen: the speed panel, or the speed strip where the panel steps aside, while the reply
streams and after it, and the reply's status line.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Label, Static

from app.backend.replay import ReplayBackend, trace_path
from app.core.chat import Role, Sampling
from app.storage import ChatStore, MessageStatus
from app.ui import LingChatApp
from app.ui.widgets.speed_panel import SpeedPanel
from app.ui.widgets.speed_strip import SpeedStrip
from tests.support.pilot import chat_screen, send, text_of, wait_until

TOLERANCE = 0.05
QUESTIONS = ("What did each lever do?", "And how is accept length measured?")
AVERAGE = re.compile(r"^average\s+[\d,.]+ tok/s", re.MULTILINE)
"""The live view's average row with a number: two chunks have come."""


@dataclass(frozen=True)
class Recorded:
    """One recorded reply, from the trace file."""

    chunks: list[tuple[float, int]]
    """(t, completion tokens so far) of each chunk."""
    tokens: int
    verify_rounds: int
    ended_s: float

    @property
    def ttft_s(self) -> float:
        return self.chunks[0][0]

    @property
    def tpot_s(self) -> float:
        return (self.ended_s - self.ttft_s) / (self.tokens - 1)

    @property
    def accept(self) -> float:
        return self.tokens / self.verify_rounds

    def live(self, tokens: int) -> dict[str, float]:
        """What the live view must show once the chunk that brought `tokens` has arrived."""
        index = max(i for i, (_, n) in enumerate(self.chunks) if n == tokens)
        (t0, n0), (t, n) = self.chunks[0], self.chunks[index]
        start = max((i for i, (ti, _) in enumerate(self.chunks) if ti <= t - 1.0), default=0)
        steps = sum(b > a for (_, a), (_, b) in itertools.pairwise(self.chunks[: index + 1]))
        return {
            "average": (n - n0) / (t - t0),
            "decode": (n - self.chunks[start][1]) / (t - self.chunks[start][0]),
            "TPOT": (t - t0) / (n - n0) * 1000,
            "tok/step": (n - n0) / steps,
        }


def recorded_replies() -> list[Recorded]:
    trace = json.loads(trace_path("demo").read_text(encoding="utf-8"))
    replies = []
    for reply in trace["replies"]:
        events = reply["events"]
        usage = events[-1]["usage"]
        replies.append(
            Recorded(
                chunks=[(e["t"], e["completion_tokens"]) for e in events if e["type"] == "chunk"],
                tokens=usage["completion_tokens"],
                verify_rounds=usage["verify_rounds"],
                ended_s=events[-1]["t"],
            )
        )
    return replies


def number(text: str, pattern: str) -> float:
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"{pattern!r} not in {text!r}"
    return float(found.group(1).replace(",", ""))


def close(shown: float, recorded: float, unit: float) -> bool:
    """Within TOLERANCE of the recorded value, give or take half the unit shown."""
    return abs(shown - recorded) <= TOLERANCE * recorded + unit / 2


def live_numbers(panel: str) -> dict[str, float]:
    return {
        "tokens": number(panel, r"^tokens\s+([\d,]+)"),
        "average": number(panel, r"^average\s+([\d,.]+) tok/s"),
        "decode": number(panel, r"^decode\s+([\d,.]+) tok/s"),
        "TPOT": number(panel, r"^TPOT\s+([\d.]+) ms"),
        "TTFT": number(panel, r"^TTFT\s+([\d.]+) s"),
        "tok/step": number(panel, r"^tok/step\s+([\d.]+)"),
    }


STRIP_LIVE = re.compile(r"^● .*[\d,.]+ tok/s")
"""The strip's live figures with a rate: two chunks have come."""


def strip_numbers(strip: str) -> dict[str, float]:
    return {
        "tokens": number(strip, r"([\d,]+) tokens"),
        "average": number(strip, r"([\d,.]+) tok/s"),
        "TPOT": number(strip, r"TPOT ([\d.]+) ms"),
        "tok/step": number(strip, r"([\d.]+) tok/step"),
    }


def rate_unit(value: float) -> float:
    return 1.0 if value >= 100 else 0.1


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    """The demo trace without its load stages: its replies and proof as shipped, and no six
    seconds of replayed start-up before each test."""
    trace = json.loads(trace_path("demo").read_text(encoding="utf-8"))
    path = tmp_path / "demo.trace.json"
    path.write_text(json.dumps({**trace, "stages": []}), encoding="utf-8")
    return path


def after_update(widget: Static, read: Callable[[], None]) -> None:
    """Call `read` each time `widget` is given new content."""
    update = widget.update

    def updated(*args: Any, **kwargs: Any) -> None:
        update(*args, **kwargs)
        read()

    widget.update = updated  # type: ignore[method-assign]


async def play(
    demo: Path,
    store: ChatStore,
    size: tuple[int, int],
    speed: float,
    questions: tuple[str, ...],
) -> tuple[list[dict[str, float]], list[str], list[str], str]:
    """Ask `questions` of the demo at `speed` on a `size` terminal: the live numbers sampled
    while each reply streamed (from the panel, or the strip where the panel is hidden), the
    speed panel or strip and status line after each, the title."""
    app = LingChatApp(ReplayBackend(demo, speed=speed), store, sampling=Sampling(), proof_hold_s=0)
    samples: list[dict[str, float]] = []
    panels: list[str] = []
    footers: list[str] = []
    async with app.run_test(size=size) as pilot:
        screen = await chat_screen(pilot)
        speed_panel = screen.query_one(SpeedPanel)
        strip = screen.query_one(SpeedStrip)
        numbers = screen.query_one("#reply-numbers", Static)
        heading = screen.query_one("#reply-heading", Label)
        asked = 0

        def panel_drawn() -> None:
            # the live view once two chunks have come (before the first: "waiting")
            live = text_of(heading).startswith("Live") and AVERAGE.search(text_of(numbers))
            if speed_panel.display and live:
                samples.append({"reply": asked, **live_numbers(text_of(numbers))})

        def strip_drawn() -> None:
            if strip.display and STRIP_LIVE.search(text_of(strip)):
                samples.append({"reply": asked, **strip_numbers(text_of(strip))})

        # every frame the reply draws is read, not a poll's sample of them: a loaded machine
        # may not poll between a fast replay's draws
        after_update(numbers, panel_drawn)
        after_update(strip, strip_drawn)
        for asked, question in enumerate(questions):  # noqa: B007 (read by the readers above)
            await send(pilot, question)
            deadline = time.monotonic() + 60
            while not (screen.run is None and text_of(heading).startswith("Last reply")):
                assert time.monotonic() < deadline, "the reply did not end"
                await pilot.pause(0.01)
            panels.append(text_of(numbers) if speed_panel.display else text_of(strip))
            footers.append(text_of(screen.query(".reply-footer").last(Label)))
        title = app.title
    return samples, panels, footers, title


@pytest.mark.parametrize(
    ("size", "speed"),
    [((80, 24), 4.0), ((100, 30), 0.5), ((160, 48), 1.0), ((220, 60), 2.0)],
    ids=["80x24-x4", "100x30-x0.5", "160x48-x1", "220x60-x2"],
)
async def test_a_replay_shows_and_stores_the_recorded_speed(
    end_to_end: None, demo: Path, store: ChatStore, size: tuple[int, int], speed: float
) -> None:
    questions = QUESTIONS if speed >= 1 else QUESTIONS[:1]  # a slow replay: one reply is enough
    recorded = recorded_replies()[: len(questions)]
    samples, panels, footers, title = await play(demo, store, size, speed, questions)

    assert ("replay x" in title) == (speed != 1.0)
    if speed != 1.0:
        assert f"replay x{speed:g}" in title
    for reply, footer in zip(recorded, footers, strict=True):
        tps = 1 / reply.tpot_s
        assert footer.startswith("✓")
        assert close(number(footer, r"([\d,.]+) tok/s"), tps, rate_unit(tps)), (footer, tps)
        assert close(number(footer, r"accept ([\d.]+)"), reply.accept, 0.01), footer
        assert close(number(footer, r"TTFT ([\d.]+) s"), reply.ttft_s, 0.01), footer
    for reply, panel in zip(recorded, panels, strict=True):
        tps = 1 / reply.tpot_s
        rows = r"^{}\s+" if panel.startswith("decode") else r"{} "  # the panel, or the strip
        assert close(number(panel, r"([\d,.]+) tok/s"), tps, rate_unit(tps)), panel
        assert close(number(panel, rows.format("TPOT") + r"([\d.]+) ms"), reply.tpot_s * 1e3, 0.01)
        assert close(number(panel, rows.format("TTFT") + r"([\d.]+) s"), reply.ttft_s, 0.01)
        assert close(number(panel, rows.format("accept") + r"([\d.]+)"), reply.accept, 0.01)
    assert any("decode" in sample for sample in samples) is (size[0] >= 100)
    assert any("decode" not in sample for sample in samples) is (size[0] < 100)
    for sample in samples:
        streamed = recorded[int(sample["reply"])]
        want = streamed.live(int(sample["tokens"]))
        for name in ("average", "decode"):
            if name in sample:
                assert close(sample[name], want[name], rate_unit(want[name])), (name, sample)
        assert close(sample["TPOT"], want["TPOT"], 0.01), (sample, want)
        assert close(sample["tok/step"], want["tok/step"], 0.01), (sample, want)
        if "TTFT" in sample:
            assert close(sample["TTFT"], streamed.ttft_s, 0.01), sample

    (conversation,) = store.list_conversations()
    stored = [m for m in store.messages(conversation.id) if m.role is Role.ASSISTANT]
    for reply, message in zip(recorded, stored, strict=True):
        stats = message.stats
        assert message.status is MessageStatus.COMPLETE and stats is not None
        assert (
            stats.completion_tokens == reply.tokens and stats.verify_rounds == reply.verify_rounds
        )
        assert stats.tpot_s == pytest.approx(reply.tpot_s, rel=1e-6)
        assert stats.decode_tps == pytest.approx(1 / reply.tpot_s, rel=1e-6)
        assert stats.accept_length == pytest.approx(reply.accept, rel=1e-9)
        assert stats.ttft_s == pytest.approx(reply.ttft_s, abs=2e-3)
        assert stats.latency_s == pytest.approx(reply.ended_s, abs=2e-3)


async def test_a_slowed_replay_says_so_and_streams_the_recorded_speed_until_stopped(
    end_to_end: None, demo: Path, store: ChatStore
) -> None:
    """At x0.02 the live numbers are still the recording's; Esc stops the reply at the
    recorded time reached, and the stored speed is the recording's up to there."""
    (reply, *_) = recorded_replies()
    app = LingChatApp(ReplayBackend(demo, speed=0.02), store, sampling=Sampling(), proof_hold_s=0)
    samples: list[dict[str, float]] = []
    async with app.run_test(size=(100, 30)) as pilot:
        screen = await chat_screen(pilot)
        numbers = screen.query_one("#reply-numbers", Static)
        heading = screen.query_one("#reply-heading", Label)
        await send(pilot, QUESTIONS[0])
        await wait_until(pilot, lambda: AVERAGE.search(text_of(numbers)), timeout=30)
        while len(samples) < 3:
            assert text_of(heading) == "Live ● replay x0.02"
            samples.append(live_numbers(text_of(numbers)))
            await pilot.pause(0.05)
        await pilot.press("escape")
        await wait_until(pilot, lambda: screen.run is None)
        assert app.title == "ling-chat · replay x0.02 of a recorded session"
        await wait_until(pilot, lambda: text_of(heading) == "Last reply ■ stopped · x0.02")
    for sample in samples:
        want = reply.live(int(sample["tokens"]))
        assert close(sample["average"], want["average"], rate_unit(want["average"])), sample
        assert close(sample["TPOT"], want["TPOT"], 0.01), (sample, want)
        assert close(sample["TTFT"], reply.ttft_s, 0.01), sample
    (conversation,) = store.list_conversations()
    stopped = store.messages(conversation.id)[-1]
    assert stopped.status is MessageStatus.STOPPED and stopped.stats is not None
    tokens = stopped.stats.completion_tokens
    assert tokens < reply.tokens, "Esc came before the recorded reply ended"
    t0 = reply.chunks[0][0]
    last = max(i for i, (_, n) in enumerate(reply.chunks) if n == tokens)
    shortest = (reply.chunks[last][0] - t0) / (tokens - 1)
    longest = (reply.chunks[last + 1][0] - t0) / (tokens - 1)
    assert stopped.stats.tpot_s is not None and shortest <= stopped.stats.tpot_s <= longest
