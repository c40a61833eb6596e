"""Fixtures for the history store tests: real SQLite files under tmp_path."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.storage import ChatStore
from tests.support.clock import FakeClock


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "history.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChatStore]:
    store = ChatStore.open(db_path)
    yield store
    store.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def committed(db_path: Path) -> Callable[..., list[dict[str, Any]]]:
    """Run a query on a fresh connection: shows only what another process would see."""

    def query(sql: str, *params: Any) -> list[dict[str, Any]]:
        conn = sqlite3.connect(db_path)
        conn.row_factory = sqlite3.Row
        try:
            return [dict(row) for row in conn.execute(sql, params)]
        finally:
            conn.close()

    return query
