"""Processes a test session left behind: its descendants, and any process that carries the
session's mark in its environment (a detached one, whose parent has gone, too)."""

from __future__ import annotations

import os
import time
import uuid

import psutil

from app.backend.engine.sglang_processes import _stop_trees as stop_trees

MARK = "LING_CHAT_TEST_SESSION"
"""Set in the session's environment, so that every process it starts inherits it."""
SESSION_LIFETIME = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
"""multiprocessing's helpers of the session itself: they end when the session ends."""


def mark_session() -> str:
    """Mark this process's environment (the children's to come) with a fresh token."""
    token = uuid.uuid4().hex
    os.environ[MARK] = token
    return token


def left_behind(token: str, wait_s: float, before: set[int] = frozenset()) -> list[psutil.Process]:
    """The session's processes, but those in `before`, still running after up to `wait_s`
    (those that are being stopped get the time to end)."""
    deadline = time.monotonic() + wait_s
    while (found := [p for p in running(token) if p.pid not in before]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.1)
    return found


def describe(found: psutil.Process) -> str:
    """pid and command line, for the report."""
    try:
        command = " ".join(found.cmdline())
    except psutil.Error:
        command = "?"
    return f"pid {found.pid}: {command[:300]}"


def stop(found: list[psutil.Process], grace_s: float = 3.0) -> None:
    """SIGTERM to each with its descendants, then SIGKILL for what is left after `grace_s`
    (as the engine stops SGLang's processes)."""
    stop_trees(found, grace_s)


def running(token: str) -> list[psutil.Process]:
    """The session's processes running now."""
    me = psutil.Process()
    found = {child.pid: child for child in me.children(recursive=True)}
    for process in psutil.process_iter():
        if process.pid == me.pid or process.pid in found:
            continue
        try:
            if process.environ().get(MARK) == token:
                found[process.pid] = process
        except psutil.Error:  # gone, a zombie, or not ours to read
            continue
    return [process for process in found.values() if _counts(process, me.pid)]


def _counts(process: psutil.Process, session_pid: int) -> bool:
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            return False  # it ended; only its exit status waits to be read
        helper = any(name in " ".join(process.cmdline()) for name in SESSION_LIFETIME)
        return not (helper and process.ppid() == session_pid)
    except psutil.Error:
        return False
