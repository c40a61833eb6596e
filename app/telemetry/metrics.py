"""Pure functions from token arrival times and a reply's usage record to reply metrics.

Definitions (docs/performance.md repeats them):
- TTFT: first text arrival minus request start.
- TPOT: (latency - TTFT) / (completion_tokens - 1); the first token is prefill's.
- decode tokens/s: 1 / TPOT.
- accept length: completion_tokens / verify rounds (`ReplyUsage.accept_length`).
- accept rate: correct drafts / proposed drafts (`ReplyUsage.accept_rate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from app.core.reply_usage import ReplyUsage


def time_per_output_token(latency_s: float, ttft_s: float, completion_tokens: int) -> float | None:
    """TPOT in seconds, or None when fewer than two tokens were generated."""
    if completion_tokens < 2 or latency_s <= ttft_s:
        return None
    return (latency_s - ttft_s) / (completion_tokens - 1)


def pooled_accept_length(replies: Iterable[ReplyStats]) -> float | None:
    """Tokens per verify round over the replies that report rounds, pooled as SGLang does."""
    speculative = [r for r in replies if r.verify_rounds]
    rounds = sum(r.verify_rounds or 0 for r in speculative)
    return sum(r.completion_tokens for r in speculative) / rounds if rounds else None


def decode_tokens_per_second(tpot_s: float | None) -> float | None:
    """Decode speed from TPOT."""
    if tpot_s is None or tpot_s <= 0:
        return None
    return 1.0 / tpot_s


@dataclass(frozen=True, slots=True)
class ReplyStats:
    """The measurements of one finished (or interrupted) reply."""

    prompt_tokens: int
    completion_tokens: int
    ttft_s: float | None
    latency_s: float
    tpot_s: float | None
    decode_tps: float | None
    accept_length: float | None = None
    accept_rate: float | None = None
    verify_rounds: int | None = None
    """Speculative verify rounds (`ReplyUsage.verify_rounds`); None without speculation."""
    cached_tokens: int | None = None
    """Prompt tokens served from SGLang's prefix cache, when it reported them."""
    accept_histogram: tuple[int, ...] | None = None
    """Verify rounds that accepted 0, 1, 2, ... drafts, when SGLang reports it."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Facts with no field of their own (none today; kept for what a newer version adds)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        data = asdict(self)
        data["accept_histogram"] = (
            list(self.accept_histogram) if self.accept_histogram is not None else None
        )
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplyStats:
        """Rebuild stats written by `to_dict`, or by a version that named the counters
        otherwise (`verify_ct`, `extra["cached_tokens"]`); other keys are dropped."""
        values = {k: v for k, v in data.items() if k in _STATS_FIELDS}
        histogram = values.get("accept_histogram")
        values["accept_histogram"] = tuple(histogram) if histogram is not None else None
        extra = dict(values.get("extra") or {})
        if values.get("verify_rounds") is None:
            values["verify_rounds"] = data.get(LEGACY_VERIFY_ROUNDS)
        if values.get("cached_tokens") is None:
            values["cached_tokens"] = extra.get("cached_tokens")
        extra.pop("cached_tokens", None)
        values["extra"] = extra
        return cls(**values)


_STATS_FIELDS = {f.name for f in fields(ReplyStats)}
LEGACY_VERIFY_ROUNDS = "verify_ct"
"""What stats stored and exported before this version called `verify_rounds`; their
`cached_tokens` sat in `extra`."""


def reply_stats(
    started_at: float, arrivals: Sequence[float], usage: ReplyUsage, ended_at: float
) -> ReplyStats:
    """Measure a reply from the request start, text arrival times and its usage.

    Args:
        started_at: perf_counter() when the request was sent.
        arrivals: perf_counter() of each text chunk, in order.
        usage: the reply's usage, as its backend reported it when the reply ended.
        ended_at: perf_counter() when the reply ended.
    """
    completion = usage.completion_tokens
    ttft = arrivals[0] - started_at if arrivals else None
    latency = ended_at - started_at
    tpot = time_per_output_token(latency, ttft, completion) if ttft is not None else None
    return ReplyStats(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=completion,
        ttft_s=ttft,
        latency_s=latency,
        tpot_s=tpot,
        decode_tps=decode_tokens_per_second(tpot),
        accept_length=usage.accept_length,
        accept_rate=usage.accept_rate,
        verify_rounds=usage.verify_rounds or None,
        cached_tokens=usage.cached_tokens,
        accept_histogram=usage.accept_histogram,
    )


def continued_stats(earlier: ReplyStats, later: ReplyStats) -> ReplyStats:
    """One reply's stats from its parts: `earlier`, then its continuation `later`.

    Tokens, time and verify rounds are summed; TPOT is the decode time (each part's latency
    after its first text) over the tokens decoded after each part's first; accept length is
    the tokens over every verify round; the accept rate is the parts' rates weighted by their
    rounds (each round drafts as many tokens); TTFT and the prompt are the first part's."""
    completion = earlier.completion_tokens + later.completion_tokens
    decode, decoded = 0.0, 0
    for part in (earlier, later):
        if part.ttft_s is not None and part.completion_tokens > 1:
            decode += part.latency_s - part.ttft_s
            decoded += part.completion_tokens - 1
    tpot = decode / decoded if decoded and decode > 0 else None
    rounds = (earlier.verify_rounds or 0) + (later.verify_rounds or 0)
    rates = [(p.accept_rate, p.verify_rounds or 0) for p in (earlier, later)]
    weighed = [(rate, n) for rate, n in rates if rate is not None and n]
    histogram = None
    if earlier.accept_histogram is not None or later.accept_histogram is not None:
        a, b = earlier.accept_histogram or (), later.accept_histogram or ()
        histogram = tuple(
            (a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0)
            for i in range(max(len(a), len(b)))
        )
    return ReplyStats(
        prompt_tokens=earlier.prompt_tokens,
        completion_tokens=completion,
        ttft_s=earlier.ttft_s if earlier.ttft_s is not None else later.ttft_s,
        latency_s=earlier.latency_s + later.latency_s,
        tpot_s=tpot,
        decode_tps=decode_tokens_per_second(tpot),
        accept_length=pooled_accept_length((earlier, later)),
        accept_rate=(
            sum(rate * n for rate, n in weighed) / sum(n for _, n in weighed) if weighed else None
        ),
        verify_rounds=rounds or None,
        cached_tokens=earlier.cached_tokens,
        accept_histogram=histogram,
    )
