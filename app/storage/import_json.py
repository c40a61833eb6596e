"""An export file's JSON documents, read within limits before any field is looked at.

A file from elsewhere is untrusted: one message could be large enough to stall the chat
that opens it, a key given twice would be read as its last value without a word, and a
value nested deep enough breaks what prints or exports it later. Each of these is refused
in one line naming the file (and line) and where in the document it is.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from app.core.errors import ImportFailed

MAX_TEXT_CHARS: Final = 1 << 20
"""The longest string an import takes: 1,048,576 characters, the model's whole context
(262,144 tokens) at about 4 characters a token. A message past it could not be sent back
to the model in any conversation, while every reply ling-chat writes (131,072 tokens at
most) still round-trips. The chat's time to open a message grows with its length."""
MAX_FILE_BYTES: Final = 512 << 20
"""The largest file an import reads: 512 MiB, hundreds of thousands of replies; parsing
JSON takes several times a file's size in memory."""
MAX_DEPTH: Final = 32
"""The deepest nesting an import takes, anywhere: an export nests 8 deep at most
(document, conversations, conversation, messages, message, stats, extra, a value)."""


def read_text(path: Path) -> str:
    """The text of a regular file of at most `MAX_FILE_BYTES` (a FIFO or `/dev/zero` would
    never end).

    Raises:
        ImportFailed: the file cannot be read, is no regular file, is too large or is not
            UTF-8.
    """
    try:
        # Non-blocking: opening a FIFO with no writer would wait forever.
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            status = os.fstat(file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise ImportFailed(f"cannot read {path}: not a regular file")
            data = b"" if status.st_size > MAX_FILE_BYTES else file.read(MAX_FILE_BYTES + 1)
        if status.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
            raise ImportFailed(f"cannot read {path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImportFailed(f"cannot read {path}: {exc}") from exc


def documents(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    """(where, parsed JSON) for the whole file, or for each line of a JSONL file.

    Raises:
        ImportFailed: a line is not JSON, or a document breaks a limit.
    """
    try:
        whole = _parse(str(path), text)
    except json.JSONDecodeError:
        pass
    else:
        yield str(path), whole
        return
    for number, line in enumerate(text.split("\n"), 1):  # not at U+2028, which JSON may hold
        if line.strip():
            try:
                yield f"{path}:{number}", _parse(f"{path}:{number}", line)
            except json.JSONDecodeError as exc:
                raise ImportFailed(f"{path}:{number}: not JSON ({exc.msg})") from exc


def _parse(where: str, text: str) -> Any:
    """`text` parsed as JSON and checked against the limits.

    Raises:
        json.JSONDecodeError: `text` is not JSON (the caller tries it as JSONL).
        ImportFailed: a duplicate key, nesting past `MAX_DEPTH` or Python's stack, a
            string past `MAX_TEXT_CHARS`, or a number Python will not convert.
    """
    try:
        document = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ImportFailed(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except _DuplicateKey as exc:
        raise ImportFailed(f"{where}: the key {exc} appears twice in one object") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # e.g. an integer past Python's digit limit
        raise ImportFailed(f"{where}: {exc}") from None
    _check_limits(where, document)
    return document


class _DuplicateKey(ValueError):
    """A key given twice in one JSON object (its repr is the message)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice raises `_DuplicateKey`."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(repr(key))
            seen.add(key)
    return found


def _check_limits(where: str, document: Any) -> None:
    """Refuse nesting past `MAX_DEPTH`, strings past `MAX_TEXT_CHARS` (keys included) and
    numbers that are not finite (`NaN`, `Infinity`, `1e999`)."""
    pending: list[tuple[Any, int, str]] = [(document, 1, "")]
    while pending:
        value, depth, path = pending.pop()
        if isinstance(value, str):
            if len(value) > MAX_TEXT_CHARS:
                raise ImportFailed(
                    f"{where}: {path or 'the document'}: a text of {len(value):,} characters, "
                    f"over the limit of {MAX_TEXT_CHARS:,}"
                )
            continue
        if isinstance(value, float) and not math.isfinite(value):
            raise ImportFailed(f"{where}: {path}: {value!r} is not a finite number")
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise ImportFailed(f"{where}: {path}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(value, dict):
            for key, item in value.items():
                pending.append((key, depth, f"{path}.{key[:40]}".lstrip(".")))
                pending.append((item, depth + 1, f"{path}.{key[:40]}".lstrip(".")))
        else:
            pending.extend((item, depth + 1, f"{path}[{i}]") for i, item in enumerate(value))
