"""A history made read-only for real, even for root: a permission to root is no refusal, so
under root the file or folder is bind-mounted onto itself read-only (the kernel then refuses
every write with EROFS, whoever asks); under another user, its mode is taken away."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def made_read_only(target: Path) -> Iterator[None]:
    """`target` (the history file, or its folder with everything in it) read-only until the
    block ends; skips where root may not mount (a container without CAP_SYS_ADMIN)."""
    if os.geteuid() != 0:
        modes = {path: path.stat().st_mode for path in (target, *_inside(target))}
        for path in modes:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    for step in (["--bind", str(target), str(target)], ["-o", "remount,bind,ro", str(target)]):
        done = subprocess.run(["mount", *step], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            subprocess.run(["umount", str(target)], capture_output=True, check=False)
            pytest.skip(f"cannot bind-mount {target} read-only here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(target)], check=True)


def _inside(target: Path) -> list[Path]:
    return sorted(target.rglob("*")) if target.is_dir() else []
