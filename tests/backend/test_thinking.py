"""Ling's thinking split from raw streamed text, however its deltas fall (thinking.py)."""

from __future__ import annotations

import pytest

from app.backend.thinking import ThinkingSplit, continued_text
from app.core.chat import PartialReply

RAW = "<think>Let me see.</think>The answer."


def split_in(pieces: list[str]) -> tuple[str, str, bool]:
    split = ThinkingSplit()
    parts = [split.feed(piece) for piece in pieces] + [split.end()]
    return "".join(r for r, _ in parts), "".join(a for _, a in parts), split.closed


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 100])
def test_any_cut_of_the_stream_splits_the_same(size: int) -> None:
    pieces = [RAW[i : i + size] for i in range(0, len(RAW), size)]
    assert split_in(pieces) == ("Let me see.", "The answer.", True)


def test_a_thinking_that_starts_without_its_tag_is_thinking_too() -> None:
    assert split_in(["Hm", "m.</th", "ink>Yes"]) == ("Hmm.", "Yes", True)


def test_a_stream_that_ends_inside_the_thinking_keeps_a_half_tag_as_thinking() -> None:
    assert split_in(["Cut off here </thi"]) == ("Cut off here </thi", "", False)


def test_text_that_only_looks_like_a_tag_is_let_through() -> None:
    assert split_in(["a < b", "</x> c"]) == ("a < b</x> c", "", False)


def test_a_continued_reply_is_written_back_as_the_model_wrote_it() -> None:
    assert continued_text(PartialReply("thinking", "")) == "thinking"
    assert continued_text(PartialReply("thinking", "answer")) == "thinking</think>answer"
    assert continued_text(PartialReply("", "answer")) == "answer"
