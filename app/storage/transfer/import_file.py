"""An export file's JSON documents, read in pieces: memory holds one conversation at a
time, not the file; each value within limits (`import_json`).

A file whose first line is a whole JSON value and that has more lines is JSON Lines (one
document a line); otherwise it is one document. A document that is an object whose
`schema_version` and `engine_runs` come before its `conversations` (as ling-chat writes
them) streams its conversations one by one; any other is parsed whole.
"""

from __future__ import annotations

import codecs
import itertools
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from app.core.errors import ImportFailed
from app.storage.transfer.import_json import MAX_DEPTH, DuplicateKey, LimitedDecoder, check, parse

MAX_FILE_BYTES: Final = 512 << 20
"""The largest file an import reads: 512 MiB, hundreds of thousands of replies. Streamed,
memory holds a piece of it; a document that does not stream is parsed whole, which takes
several times its size."""
STREAMED_AFTER: Final = ("schema_version", "engine_runs")
"""The fields a document's conversations stream after; else the document is read whole."""
_PIECE = 1 << 20
"""The least a read takes from the file (a value longer than the text at hand doubles it)."""
_INK = re.compile(r"[^ \t\n\r]")
"""Anything but JSON's white space."""


@dataclass(slots=True)
class Document:
    """One JSON document of an export file."""

    where: str
    """The file, or `file:line` in JSON Lines."""
    fields: dict[str, Any]
    """Its top-level fields (without `conversations` when they stream)."""
    conversations: Iterator[Any]
    """Its conversation records, each within the limits (else ImportFailed, as for a document
    without a list of them); read them all before the next document."""


class ExportReader:
    """The documents of one export file, read in pieces (module docstring); a context manager.

    Raises (opening it):
        ImportFailed: the file cannot be read, is no regular file or is too large.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        """The file's size in bytes."""
        self.read_bytes = 0
        """How many of them were read so far."""
        try:
            # Non-blocking: opening a FIFO with no writer would wait forever.
            self._file: IO[bytes] = os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb")
        except OSError as exc:
            raise ImportFailed(f"cannot read {path}: {exc}") from exc
        try:
            status = os.fstat(self._file.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise ImportFailed(f"cannot read {path}: not a regular file")
            if status.st_size > MAX_FILE_BYTES:
                raise ImportFailed(f"cannot read {path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        except BaseException:
            self._file.close()
            raise
        self.size = status.st_size
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._json = LimitedDecoder()
        self._text = ""
        self._at = 0
        self._ended = False

    @property
    def done_bytes(self) -> int:
        """About how many bytes were taken from the file: those read, less the text held
        (counted as one byte a character)."""
        return max(0, self.read_bytes - (len(self._text) - self._at))

    def __enter__(self) -> ExportReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._file.close()

    def documents(self) -> Iterator[Document]:
        """The file's documents in order (none for an empty or blank file).

        Raises:
            ImportFailed: the file cannot be read, is not UTF-8, or a document is not JSON
                or breaks a limit.
        """
        lines = self._lines()
        first = next(lines, None)
        if first is None:
            return
        second = next(lines, None)
        if second is None:  # one line: one document, parsed whole
            yield _whole(str(self.path), _parse_line(str(self.path), first[1], self._json))
            return
        where = f"{self.path}:{first[0]}"
        try:
            document = parse(where, first[1], self._json)
        except json.JSONDecodeError:  # not JSON Lines: one document over several lines
            yield from self._document()
            return
        yield _whole(where, document)
        for number, line in itertools.chain([second], lines):
            where = f"{self.path}:{number}"
            yield _whole(where, _parse_line(where, line, self._json))

    def _lines(self) -> Iterator[tuple[int, str]]:
        """(number, text) of each line that is not blank."""
        number = 0
        while (line := self._line()) is not None:
            number += 1
            if line.strip():
                yield number, line

    def _document(self) -> Iterator[Document]:
        """One document over several lines, its conversations streamed when it allows."""
        where = str(self.path)
        self._rewind()
        if self._peek() != "{":
            yield _whole(where, self._parse_all(where))
            return
        self._at += 1
        fields: dict[str, Any] = {}
        streamed = False
        while self._peek() != "}":
            key = self._value(where, 1, "")
            if not isinstance(key, str) or self._peek() != ":":
                raise ImportFailed(f"{where}: not JSON (a key and a colon expected)")
            self._at += 1
            if key in fields:
                raise ImportFailed(f"{where}: the key {key!r} appears twice in one object")
            if key == "conversations" and self._peek() == "[":
                if not all(name in fields for name in STREAMED_AFTER):
                    yield _whole(where, self._parse_all(where))
                    return
                fields[key], streamed = [], True
                records = self._stream(where)
                yield Document(where, dict(fields), records)
                for _ in records:  # what the caller left unread
                    pass
            else:
                fields[key] = self._value(where, 2, key[:40])
            if self._peek() == ",":
                self._at += 1
            elif self._peek() != "}":
                raise ImportFailed(f"{where}: not JSON (a comma or a closing brace expected)")
        self._at += 1
        if self._peek():
            raise ImportFailed(f"{where}: not JSON (more text after the document)")
        if not streamed:
            yield _whole(where, fields)

    def _stream(self, where: str) -> Iterator[Any]:
        """The elements of the array at hand, each checked against the limits."""
        self._at += 1  # the [
        index = 0
        while self._peek() != "]":
            record = self._value(where, 3, f"conversations[{index}]")
            yield record
            index += 1
            if self._peek() == ",":
                self._at += 1
            elif self._peek() != "]":
                raise ImportFailed(f"{where}: not JSON (a comma or a closing bracket expected)")
        self._at += 1

    def _value(self, where: str, depth: int, path: str) -> Any:
        """The JSON value at hand, found at `depth` and `path` of the document, checked
        against the limits; read on while it may be cut short."""
        self._peek()
        while True:
            self._json.unbounded = False
            try:
                value, end = self._json.raw_decode(self._text, self._at)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated") or exc.pos >= len(self._text) - 16
                if cut and self._more():
                    continue
                raise ImportFailed(f"{where}: not JSON ({exc.msg})") from exc
            except RecursionError:
                raise ImportFailed(f"{where}: JSON nested deeper than {MAX_DEPTH} levels") from None
            except DuplicateKey as exc:
                raise ImportFailed(f"{where}: the key {exc} appears twice in one object") from None
            except ValueError as exc:  # e.g. an integer past Python's digit limit
                raise ImportFailed(f"{where}: {exc}") from None
            if end == len(self._text) and self._more():  # a number may go on
                continue
            check(where, value, self._text, self._at, end, self._json, depth, path)
            self._at = end
            return value

    def _parse_all(self, where: str) -> Any:
        """The whole file, parsed whole."""
        self._rewind()
        while self._more():
            pass
        text, self._text, self._at = self._text[self._at :], "", 0
        try:
            return parse(where, text, self._json)
        except json.JSONDecodeError as exc:
            raise ImportFailed(f"{where}: not JSON ({exc.msg})") from exc

    def _line(self) -> str | None:
        """The next line (without its LF), or None at the end of the file."""
        while (end := self._text.find("\n", self._at)) < 0:
            if not self._more():
                if self._at >= len(self._text):
                    return None
                end = len(self._text)
                break
        line = self._text[self._at : end]
        self._at = end + 1
        return line

    def _peek(self) -> str:
        """The next character that is not white space, skipping to it ('' at the end)."""
        while (found := _INK.search(self._text, self._at)) is None:
            self._at = len(self._text)
            if not self._more():
                return ""
        self._at = found.start()
        return found.group()

    def _rewind(self) -> None:
        """Back to the file's first character (the first line was read as a probe)."""
        self._file.seek(0)
        self._decoder.reset()
        self._text, self._at, self._ended, self.read_bytes = "", 0, False, 0

    def _more(self) -> bool:
        """Read on: at least `_PIECE`, or as much as is held (a long value doubles the
        read); False at the end of the file.

        Raises:
            ImportFailed: the file cannot be read or is not UTF-8.
        """
        if self._ended:
            return False
        try:
            data = self._file.read(max(_PIECE, len(self._text) - self._at))
            self.read_bytes += len(data)
            self._ended = not data
            text = self._decoder.decode(data, final=self._ended)
        except (OSError, UnicodeDecodeError) as exc:
            raise ImportFailed(f"cannot read {self.path}: {exc}") from exc
        if self.read_bytes > MAX_FILE_BYTES:
            raise ImportFailed(f"cannot read {self.path}: larger than {MAX_FILE_BYTES >> 20} MiB")
        self._text = self._text[self._at :] + text
        self._at = 0
        return not self._ended or bool(text)


def _parse_line(where: str, text: str, decoder: LimitedDecoder) -> Any:
    """`_parse`, a line that is not JSON refused in one line."""
    try:
        return parse(where, text, decoder)
    except json.JSONDecodeError as exc:
        raise ImportFailed(f"{where}: not JSON ({exc.msg})") from exc


def _whole(where: str, document: Any) -> Document:
    """A document parsed whole, its conversations from `conversations` (a list) or, in
    JSON Lines, `conversation`."""
    fields = document if isinstance(document, dict) else {}
    found = fields.get("conversations", [fields.get("conversation")])
    return Document(where, fields, _records(where, found))


def _records(where: str, found: Any) -> Iterator[Any]:
    if not isinstance(found, list) or not all(isinstance(c, dict) for c in found):
        raise ImportFailed(f"{where}: no conversations")
    yield from found
