"""A finished reply's measurements, and another process that holds the database's lock."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from app.telemetry import ReplyStats
from tests.support.timeouts import scaled

STATS = ReplyStats(
    prompt_tokens=31,
    completion_tokens=200,
    ttft_s=0.41,
    latency_s=4.2,
    tpot_s=0.0191,
    decode_tps=52.3,
    accept_length=3.12,
    accept_rate=0.71,
    verify_rounds=64,
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
        locker.wait(timeout=scaled(10))
