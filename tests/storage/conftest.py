"""Fixtures for the history store tests: real SQLite files under tmp_path."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from app.storage import ChatStore
from app.telemetry import ReplyStats

STATS = ReplyStats(
    prompt_tokens=31,
    completion_tokens=200,
    ttft_s=0.41,
    latency_s=4.2,
    tpot_s=0.0191,
    decode_tps=52.3,
    accept_length=3.12,
    accept_rate=0.71,
    verify_ct=64,
    accept_histogram=(3, 5, 8, 48),
    extra={"finish_reason": "stop"},
)
"""A finished reply's measurements, as the tests store and export them."""

LOCKER = """
import sqlite3, sys

conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "history.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChatStore]:
    store = ChatStore.open(db_path)
    yield store
    store.close()


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


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


@contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another process holds the database's write lock inside the block."""
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert locker.stdin is not None and locker.stdout is not None
    try:
        assert locker.stdout.readline() == "locked\n"
        yield
    finally:
        locker.stdin.close()
        locker.wait(timeout=10)
