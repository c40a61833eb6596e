"""`ReplyUsage`: what one reply used and how its speculation went, as its backend reported it.

Every backend builds it once, at its edge, from what its source sends (SGLang's final
statistics in-process, the server's usage and spec details remotely, a trace on replay);
telemetry, storage, the bench and the proof's warm-up read only this record.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

MAX_COUNT: Final = 10**9
"""The largest token, round or draft count believed: more than any context or reply holds
(a server or file claiming more is broken, and such a number would overflow SQLite)."""
MAX_HISTOGRAM_BINS: Final = 1000
"""The most bins an accept histogram may have (one per draft count, and drafts are < 1000)."""


def check_count(value: object, name: str) -> int:
    """`value` as an int when it is a count: a whole number (an int or another integral
    type, such as numpy's; not a bool, a float or a string) in 0..MAX_COUNT.

    The one rule for every count ling-chat reads, from any source (a server, SGLang, a
    trace, an import file).

    Raises:
        ValueError: one line naming `name` and what is wrong with the value.
    """
    if type(value) is not int and (  # an int: no ABC check (the common case)
        not isinstance(value, numbers.Integral) or isinstance(value, bool)
    ):
        raise ValueError(f"{name} is {_shown(value)}, not a whole number")
    whole = int(value)
    if not 0 <= whole <= MAX_COUNT:
        raise ValueError(f"{name} = {_shown(whole)} is not a count in 0..{MAX_COUNT:,}")
    return whole


def count_in(source: Mapping[str, Any], key: str, name: str = "") -> int:
    """The count at `source[key]` (`check_count`, named `name` or `key`); 0 when it is
    absent or null, as a source that does not report it means."""
    return optional_count_in(source, key, name) or 0


def optional_count_in(source: Mapping[str, Any], key: str, name: str = "") -> int | None:
    """The count at `source[key]` (`check_count`, named `name` or `key`); None (unknown)
    when it is absent or null."""
    value = source.get(key)
    return None if value is None else check_count(value, name or key)


def histogram_in(source: Mapping[str, Any], key: str) -> tuple[int, ...] | None:
    """The accept histogram at `source[key]`, each bin a count; None when it is absent,
    null or empty.

    Raises:
        ValueError: it is not a list, or a bin is not a count.
    """
    value = source.get(key)
    if value is None or value == []:
        return None
    if not isinstance(value, list):
        raise ValueError(f"accept_histogram is {_shown(value)}, not a list")
    return tuple(check_count(n, "an accept_histogram bin") for n in value)


def _shown(value: object) -> str:
    """A short, always printable form of a hostile value (a huge int has no str)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit number"
    return repr(value)[:40]


@dataclass(frozen=True, slots=True)
class ReplyUsage:
    """Token counts and speculative-decoding statistics of one reply."""

    completion_tokens: int = 0
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    """Prompt tokens served from SGLang's prefix cache, when it reported them."""
    verify_rounds: int = 0
    """Speculative verify rounds (SGLang's `spec_verify_ct`); 0 without speculation."""
    correct_drafts: int = 0
    proposed_drafts: int = 0
    accept_histogram: tuple[int, ...] | None = None
    """Verify rounds that accepted 0, 1, 2, ... drafts, when SGLang reports it."""

    def __post_init__(self) -> None:
        """Every count is a whole number in 0..MAX_COUNT, whatever its source.

        Raises:
            ValueError: one line naming the first count that is not.
        """
        for name in (
            "completion_tokens",
            "prompt_tokens",
            "verify_rounds",
            "correct_drafts",
            "proposed_drafts",
        ):
            check_count(getattr(self, name), name)
        if self.cached_tokens is not None:
            check_count(self.cached_tokens, "cached_tokens")
        if self.accept_histogram is not None:
            if len(self.accept_histogram) > MAX_HISTOGRAM_BINS:
                raise ValueError(
                    f"accept_histogram has {len(self.accept_histogram):,} bins "
                    f"(at most {MAX_HISTOGRAM_BINS})"
                )
            for rounds in self.accept_histogram:
                check_count(rounds, "an accept_histogram bin")

    @property
    def accept_length(self) -> float | None:
        """Tokens per verify round, or None without speculation.

        SGLang's own convention: it counts the bonus token and the prefill token, so it
        slightly overstates very short replies.
        """
        return self.completion_tokens / self.verify_rounds if self.verify_rounds > 0 else None

    @property
    def accept_rate(self) -> float | None:
        """Share of drafted tokens the target accepted, or None when none were drafted."""
        return self.correct_drafts / self.proposed_drafts if self.proposed_drafts > 0 else None

    def then(self, later: ReplyUsage) -> ReplyUsage:
        """This part of a reply followed by `later` (thinking then answer, a reply then its
        continuation): tokens, rounds and drafts summed, so that accept length covers every
        verify round; the prompt is this part's."""
        bins = None
        if self.accept_histogram is not None or later.accept_histogram is not None:
            mine, theirs = self.accept_histogram or (), later.accept_histogram or ()
            size = max(len(mine), len(theirs))
            mine, theirs = mine + (0,) * (size - len(mine)), theirs + (0,) * (size - len(theirs))
            bins = tuple(a + b for a, b in zip(mine, theirs, strict=True))
        return ReplyUsage(
            completion_tokens=self.completion_tokens + later.completion_tokens,
            prompt_tokens=self.prompt_tokens,
            cached_tokens=self.cached_tokens,
            verify_rounds=self.verify_rounds + later.verify_rounds,
            correct_drafts=self.correct_drafts + later.correct_drafts,
            proposed_drafts=self.proposed_drafts + later.proposed_drafts,
            accept_histogram=bins,
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "completion_tokens": self.completion_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "verify_rounds": self.verify_rounds,
            "correct_drafts": self.correct_drafts,
            "proposed_drafts": self.proposed_drafts,
            "accept_histogram": (
                list(self.accept_histogram) if self.accept_histogram is not None else None
            ),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReplyUsage:
        """Rebuild a record written by `to_dict`.

        Raises:
            TypeError, ValueError: `data` is not such a record (a count that is not a whole
                number in 0..MAX_COUNT is a ValueError).
        """
        return cls(
            completion_tokens=check_count(data["completion_tokens"], "completion_tokens"),
            prompt_tokens=count_in(data, "prompt_tokens"),
            cached_tokens=optional_count_in(data, "cached_tokens"),
            verify_rounds=count_in(data, "verify_rounds"),
            correct_drafts=count_in(data, "correct_drafts"),
            proposed_drafts=count_in(data, "proposed_drafts"),
            accept_histogram=histogram_in(data, "accept_histogram"),
        )
