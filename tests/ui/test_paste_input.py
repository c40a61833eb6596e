"""A bracketed paste holding ESC reaches the app as one paste, whatever chunks it came in."""

from __future__ import annotations

import pytest
from textual import events
from textual._xterm_parser import XTermParser

from app.ui.paste_input import ESC, ESC_STAND_IN, PASTE_END, PASTE_START, PasteGuardedParser

PASTED = "one\x1b[31mred\x1b]0;title\x07two\x1b\x1b[201three ESC at the end\x1b"
RAW = f"typed{PASTE_START}{PASTED}{PASTE_END}x"


def parse(parser: XTermParser, chunks: list[str]) -> list[object]:
    return [event for chunk in chunks for event in parser.feed(chunk)]


def pastes_and_keys(found: list[object]) -> tuple[list[str], str]:
    pastes = [e.text for e in found if isinstance(e, events.Paste)]
    keys = "".join(e.character or "" for e in found if isinstance(e, events.Key))
    return pastes, keys


@pytest.mark.parametrize("cut", [None, *range(1, len(RAW))])
def test_a_paste_with_escapes_arrives_whole_in_any_chunks(cut: int | None) -> None:
    chunks = [RAW] if cut is None else [RAW[:cut], RAW[cut:]]
    pastes, keys = pastes_and_keys(parse(PasteGuardedParser(), chunks))
    assert [text.replace(ESC_STAND_IN, ESC) for text in pastes] == [PASTED]
    assert keys == "typedx"


def test_textuals_own_parser_scrambles_the_same_paste() -> None:
    """Why the guard exists: the plain parser turns the pasted ESCs into keys."""
    pastes, keys = pastes_and_keys(parse(XTermParser(), [RAW]))
    assert pastes != [PASTED]
    assert keys != "typedx"
