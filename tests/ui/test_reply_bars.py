"""The per-reply bars stand on an axis from zero."""

from __future__ import annotations

from app.ui.widgets.reply_bars import bar_rows


def test_a_bar_is_its_share_of_the_largest_from_zero() -> None:
    # 580 against 808 tok/s: 72% of the height, not an empty bar against a full one
    assert bar_rows([580.0, 808.0], width=10, height=2) == ["▃█", "██"]
    assert bar_rows([808.0, 580.0, 808.0], width=10, height=1) == ["█▆█"]


def test_only_the_newest_replies_that_fit_are_drawn() -> None:
    assert bar_rows([1.0, 2.0, 3.0, 4.0], width=2, height=1) == ["▆█"]


def test_no_reply_no_bar_and_a_tiny_value_still_shows() -> None:
    assert bar_rows([], width=5, height=2) == ["", ""]
    assert bar_rows([0.0, 0.001, 1.0], width=5, height=1) == [" ▁█"]
