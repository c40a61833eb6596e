"""The one setting that scales the tests' end-to-end waits, and deadlines a busy machine
does not eat."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.timeouts import SCALE_ENV, Deadline, scaled
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


SCHEDSTAT = Path(f"/proc/self/task/{os.getpid()}/schedstat")
HOG = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
end = time.monotonic() + 3
while time.monotonic() < end:
    pass
"""


@pytest.mark.skipif(not SCHEDSTAT.exists(), reason="the kernel keeps no schedstat")
def test_a_deadline_leaves_out_the_time_another_process_held_the_cpu(end_to_end: None) -> None:
    """A wait here times out on the time the test ran or waited on purpose, not on time a
    busy machine gave to others: sharing one CPU with a busy process, about half of it."""
    cpu = min(os.sched_getaffinity(0))
    allowed = os.sched_getaffinity(0)
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(cpu)])
    try:
        time.sleep(0.5)  # the busy process has started and holds the CPU
        os.sched_setaffinity(0, {cpu})  # this thread only
        deadline = Deadline(10)
        began = time.monotonic()
        while time.monotonic() - began < 1.5:
            pass
        elapsed = deadline.elapsed()
    finally:
        os.sched_setaffinity(0, allowed)
        hog.kill()
        hog.wait(timeout=scaled(10))
    assert elapsed < 1.2, f"{elapsed:.2f} s of 1.5 s on the wall clock"
