"""The hot list's file: written and read back whole, and refused in one line when missing,
malformed or unfit for the head."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.levers.draft.hot_list import FORMAT, HotList, HotListError, read

LISTED = HotList(ids=(5, 3, 9, 0), vocab_size=10, tokenizer_sha256="ab" * 32, corpus="c")


def test_a_list_reads_back_as_written(tmp_path: Path):
    path = tmp_path / "hot.json"
    path.write_text(LISTED.to_json(), encoding="utf-8")
    assert read(path) == LISTED
    assert LISTED.top(2, 10) == (5, 3)


def test_a_missing_list_is_one_line_saying_how_to_build_it(tmp_path: Path):
    with pytest.raises(HotListError) as err:
        read(tmp_path / "none.json")
    message = str(err.value)
    assert "\n" not in message
    assert "no hot-vocabulary list at" in message and "lab/scripts/hot_vocab.py build" in message


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("[1, 2", "not JSON"),
        ("[1, 2]", "not a hot list"),
        (json.dumps({"format": "other"}), "not a hot list"),
        (json.dumps({"format": FORMAT, "ids": [1]}), "lacks or misstates"),
        (
            json.dumps(
                {
                    "format": FORMAT,
                    "ids": [1, 1],
                    "vocab_size": 4,
                    "tokenizer_sha256": "",
                    "corpus": "",
                }
            ),
            "repeats an id",
        ),
        (
            json.dumps(
                {
                    "format": FORMAT,
                    "ids": [4],
                    "vocab_size": 4,
                    "tokenizer_sha256": "",
                    "corpus": "",
                }
            ),
            "outside the vocabulary",
        ),
    ],
)
def test_a_malformed_list_is_refused_naming_why(tmp_path: Path, text: str, says: str):
    path = tmp_path / "hot.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(HotListError, match=says):
        read(path)


def test_a_list_too_short_or_for_another_vocabulary_does_not_fit_the_head():
    with pytest.raises(HotListError, match="holds 4 ids, the head needs 5"):
        LISTED.top(5, 10)
    with pytest.raises(HotListError, match="vocabulary of 10, the head has 11"):
        LISTED.top(2, 11)
