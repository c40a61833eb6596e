"""Waiting on a condition instead of a fixed sleep, outside a Textual app."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from tests.support.timeouts import scaled


async def eventually(predicate: Callable[[], object], timeout: float = 5) -> None:
    """Let other tasks and threads run until `predicate()` is true (fails after
    `scaled(timeout)` s)."""
    deadline = time.monotonic() + scaled(timeout)
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the condition")
        await asyncio.sleep(0.01)
