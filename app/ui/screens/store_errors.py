"""Store errors on the chat screen: a one-line notice, and the screen goes on."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from textual.screen import Screen

from app.core.errors import StorageError


@contextmanager
def storage_errors_noticed(screen: Screen[Any]) -> Iterator[None]:
    """Run store calls; a StorageError ends the block with a one-line error notice."""
    try:
        yield
    except StorageError as exc:
        screen.notify(str(exc), severity="error")
