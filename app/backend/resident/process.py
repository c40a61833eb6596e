"""A resident engine's processes: alive or not, stopping them, the memory they hold.

The engine is started in a session of its own, so its process group (the server and
SGLang's scheduler and detokenizer) is the group whose id is its pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

PROC = Path("/proc")
STOP_GRACE_S = 30.0
"""How long a stopped engine has to exit after SIGTERM before its group gets SIGKILL."""


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _read(PROC / str(pid) / "stat")
    return stat is None or stat.rpartition(")")[2].split()[:1] != ["Z"]


def group(pid: int) -> list[int]:
    """The pids of the process group `pid` leads (itself first when it runs)."""
    found = []
    for entry in PROC.glob("[0-9]*"):
        stat = _read(entry / "stat")
        fields = stat.rpartition(")")[2].split() if stat else []
        if len(fields) > 2 and fields[2] == str(pid) and fields[0] != "Z":
            found.append(int(entry.name))
    return sorted(found, key=lambda p: (p != pid, p))


def stop(pid: int, grace_s: float = STOP_GRACE_S) -> bool:
    """SIGTERM to the engine (SGLang stops its children), then SIGKILL to what is left of
    its group after `grace_s`. Returns True when it had to be killed."""
    members = group(pid)
    _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not any(alive(p) for p in members):
            return False
        time.sleep(0.1)
    for member in members:
        _signal(member, signal.SIGKILL)
    return True


def memory_held(pid: int) -> str:
    """The GPU memory the engine's processes hold (nvidia-smi), else their resident set."""
    members = set(group(pid))
    try:
        rows = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.splitlines()
        used = [row.split(",") for row in rows]
        gpu = sum(
            int(mib)
            for p, mib in used
            if p.strip().isdigit() and int(p) in members
            if mib.strip().isdigit()
        )
    except (OSError, subprocess.TimeoutExpired, ValueError):
        gpu = 0
    if gpu:
        return f"{gpu / 1024:.1f} GiB of GPU memory"
    rss = sum(_rss_kib(p) for p in members) / (1 << 20)
    return f"{rss:.1f} GiB in RAM (no per-process GPU figure: on a Spark, RAM is GPU memory)"


def _rss_kib(pid: int) -> int:
    for line in (_read(PROC / str(pid) / "status") or "").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signum)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
