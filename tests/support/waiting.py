"""Waiting on a condition instead of a fixed sleep, outside a Textual app."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests.support.timeouts import Deadline


async def eventually(predicate: Callable[[], object], timeout: float = 5) -> None:
    """Let other tasks and threads run until `predicate()` is true (fails after a
    `Deadline(timeout)`)."""
    deadline = Deadline(timeout)
    while not predicate():
        if deadline.passed():
            raise AssertionError(f"timed out waiting for the condition ({deadline.seconds:g} s)")
        await asyncio.sleep(0.01)
