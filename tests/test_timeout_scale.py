"""The one setting that scales the tests' end-to-end waits."""

from __future__ import annotations

import time

import pytest

from tests.support.timeouts import SCALE_ENV, scaled
from tests.support.waiting import eventually


def test_waits_are_as_written_unless_the_scale_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCALE_ENV, raising=False)
    assert scaled(30) == 30
    monkeypatch.setenv(SCALE_ENV, "2.5")
    assert scaled(30) == 75


@pytest.mark.parametrize("value", ["fast", "0", "-1", "nan"])
def test_a_scale_that_is_not_a_positive_number_is_one_line(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(SCALE_ENV, value)
    with pytest.raises(ValueError, match=f"^{SCALE_ENV} must be") as raised:
        scaled(1)
    assert "\n" not in str(raised.value)


async def test_a_wait_on_a_condition_ends_at_the_scaled_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SCALE_ENV, "0.001")
    began = time.monotonic()
    with pytest.raises(AssertionError, match="timed out"):
        await eventually(lambda: False, timeout=100)
    assert time.monotonic() - began < 10  # 0.1 s scaled, not 100 s
