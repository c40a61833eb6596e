"""The hot-vocabulary list: token ids ranked by frequency, the rows the hot draft head keeps.

A JSON file written by `lab/scripts/hot_vocab.py build` from the model's tokenizer and a
corpus, and read by the scheduler's patch (patches/hot_vocab.py) before anything loads.
Its provenance (the tokenizer's digest, the corpus) travels with it into the proof's
evidence. None is shipped until one is built from Ling-3.0-flash's real tokenizer:
without the file the lever refuses to start.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FORMAT = "ling-chat hot vocabulary 1"


class HotListError(ValueError):
    """A hot list that is missing, malformed or does not fit the model."""


@dataclass(frozen=True, slots=True)
class HotList:
    """Token ids, most frequent first, with where they came from."""

    ids: tuple[int, ...]
    vocab_size: int
    """The tokenizer's vocabulary (the LM head's rows) the ids index."""
    tokenizer_sha256: str
    """The digest of the tokenizer.json the ids were counted with."""
    corpus: str
    """The text they were counted over, in words (files, sizes, sources)."""

    def __post_init__(self) -> None:
        if len(set(self.ids)) != len(self.ids):
            raise HotListError("the hot list repeats an id")
        if any(not 0 <= i < self.vocab_size for i in self.ids):
            raise HotListError(f"the hot list has an id outside the vocabulary {self.vocab_size}")

    def top(self, rows: int, vocab_size: int) -> tuple[int, ...]:
        """The `rows` most frequent ids, for a head of `vocab_size` rows.

        Raises:
            HotListError: it was counted for another vocabulary, or holds fewer ids.
        """
        if vocab_size != self.vocab_size:
            raise HotListError(
                f"the hot list indexes a vocabulary of {self.vocab_size}, the head has {vocab_size}"
            )
        if len(self.ids) < rows:
            raise HotListError(f"the hot list holds {len(self.ids)} ids, the head needs {rows}")
        return self.ids[:rows]

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps({"format": FORMAT, **asdict(self)}) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HotList:
        """The list a file held.

        Raises:
            HotListError: another format, or a field missing or of the wrong kind.
        """
        if data.get("format") != FORMAT:
            raise HotListError(f"not a hot list (format {data.get('format')!r}, not {FORMAT!r})")
        try:
            return cls(
                ids=tuple(int(i) for i in data["ids"]),
                vocab_size=int(data["vocab_size"]),
                tokenizer_sha256=str(data["tokenizer_sha256"]),
                corpus=str(data["corpus"]),
            )
        except (KeyError, TypeError, ValueError) as err:
            if isinstance(err, HotListError):
                raise
            raise HotListError(f"the hot list lacks or misstates {err}") from None


def read(path: Path) -> HotList:
    """The hot list at `path`.

    Raises:
        HotListError: no file there (one line saying how to build it), or a bad one.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise HotListError(
            f"no hot-vocabulary list at {path}: build it from Ling-3.0-flash's tokenizer with "
            "`python lab/scripts/hot_vocab.py build` (none is shipped yet)"
        ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise HotListError(f"{path}: not JSON ({err})") from None
    if not isinstance(data, dict):
        raise HotListError(f"{path}: not a hot list")
    return HotList.from_dict(data)
