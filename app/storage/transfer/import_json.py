"""JSON from a file from elsewhere, read within limits before any field is looked at.

A file from elsewhere is untrusted: one message could be large enough to stall the chat
that opens it, a key given twice would be read as its last value without a word, and a
value nested deep enough breaks what prints or exports it later. Each of these is refused
in one line naming the file (and line) and where in the document it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, Final

from app.core.chat import MAX_TEXT_CHARS
from app.core.errors import ImportFailed

MAX_DEPTH: Final = 32
"""The deepest nesting an import takes, anywhere: an export nests 8 deep at most
(document, conversations, conversation, messages, message, stats, extra, a value)."""


def parse(where: str, text: str, decoder: LimitedDecoder) -> Any:
    """`text` parsed as JSON and checked against the limits.

    Raises:
        json.JSONDecodeError: `text` is not JSON (the caller tries it as JSONL).
        ImportFailed: a duplicate key, nesting past `MAX_DEPTH` or Python's stack, a
            string past `MAX_TEXT_CHARS`, or a number Python will not convert.
    """
    decoder.unbounded = False
    try:
        document = decoder.decode(text)
    except RecursionError:
        raise ImportFailed(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except DuplicateKey as exc:
        raise ImportFailed(f"{where}: the key {exc} appears twice in one object") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise ImportFailed(f"{where}: {exc}") from None
    check(where, document, text, 0, len(text), decoder, 1, "")
    return document


class LimitedDecoder(json.JSONDecoder):
    """JSON whose objects refuse a key given twice, noting a number that is not finite."""

    def __init__(self) -> None:
        super().__init__(
            object_pairs_hook=_unique_keys, parse_float=self._float, parse_constant=self._constant
        )
        self.unbounded = False
        """Whether the last value parsed held a number that is not finite."""

    def _float(self, text: str) -> float:
        value = float(text)
        self.unbounded = self.unbounded or not math.isfinite(value)
        return value

    def _constant(self, name: str) -> float:  # NaN, Infinity, -Infinity
        self.unbounded = True
        return float(name)


def check(
    where: str,
    value: Any,
    text: str,
    start: int,
    end: int,
    decoder: LimitedDecoder,
    depth: int,
    path: str,
) -> None:
    """`_check_limits` for `value`, parsed from `text[start:end]`, skipped when that text
    cannot break a limit: no number that is not finite, no more characters than a string
    may hold, no more brackets than the nesting left."""
    brackets = text.count("{", start, end) + text.count("[", start, end)
    if decoder.unbounded or end - start > MAX_TEXT_CHARS or brackets > MAX_DEPTH - depth + 1:
        _check_limits(where, value, depth, path)


class DuplicateKey(ValueError):
    """A key given twice in one JSON object (its repr is the message)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice raises `DuplicateKey`."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(repr(key))
            seen.add(key)
    return found


def _check_limits(where: str, value: Any, depth: int = 1, path: str = "") -> None:
    """Refuse nesting past `MAX_DEPTH`, strings past `MAX_TEXT_CHARS` (keys included) and
    numbers that are not finite (`NaN`, `Infinity`, `1e999`) in `value`, found at `depth`
    and `path` of its document.

    Raises:
        ImportFailed: one line naming where the first such value is.
    """
    try:
        _within_limits(value, depth)
    except _OverLimit as exc:
        inside = "".join(reversed(exc.path))
        at = f"{path}{inside}" if path else inside.lstrip(".")
        raise ImportFailed(f"{where}: {at or 'the document'}: {exc}") from None


class _OverLimit(ValueError):
    """A value past a limit; `path` collects, innermost first, the keys and indexes to it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.path: list[str] = []


def _within_limits(value: Any, depth: int) -> None:
    """`_check_limits` without the message; a value is visited only when it is a container
    or breaks a limit (the common case costs no call)."""
    kind = type(value)
    if kind is str and len(value) > MAX_TEXT_CHARS:
        raise _OverLimit(
            f"a text of {len(value):,} characters, over the limit of {MAX_TEXT_CHARS:,}"
        )
    if kind is float and not math.isfinite(value):
        raise _OverLimit(f"{value!r} is not a finite number")
    if (kind is dict or kind is list) and depth > MAX_DEPTH:
        raise _OverLimit(f"nested deeper than {MAX_DEPTH} levels")
    items: Iterable[tuple[Any, Any]] = (
        value.items() if kind is dict else enumerate(value) if kind is list else ()
    )
    for key, item in items:
        try:
            if kind is dict and len(key) > MAX_TEXT_CHARS:
                _within_limits(key, depth)
            inner = type(item)
            if (
                inner is dict
                or inner is list
                or (inner is str and len(item) > MAX_TEXT_CHARS)
                or (inner is float and not math.isfinite(item))
            ):
                _within_limits(item, depth + 1)
        except _OverLimit as exc:
            exc.path.append(f".{key[:40]}" if kind is dict else f"[{key}]")
            raise
