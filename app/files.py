"""Writing a file whole or not at all; creating files and folders private to the user."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

from app.core.errors import ExportError


def write_atomic(path: Path, chunks: Iterable[str]) -> None:
    """Write text to `path` through a temporary file in the same folder and `os.replace`.

    Either the whole new text lands or the old file stays as it was; if producing the
    chunks raises, that exception propagates and no temporary file is left behind.
    A symlink is written through (its target is replaced, the link stays); a new file is
    private to the user (mode 0600).

    Raises:
        ExportError: the file could not be written, or exists but is no regular file.
    """
    target = _regular_target(path)
    try:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write to {target.parent}: {exc.strerror}") from exc
    temp = Path(name)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.writelines(chunks)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ExportError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def private_dir(path: Path) -> None:
    """Create the folder `path` and its missing parents private to the user (mode 0700,
    whatever the umask); folders that exist are left as they are.

    Raises:
        OSError: a folder cannot be created.
    """
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:
            continue  # made meanwhile by another process
        os.chmod(folder, 0o700)
    path.mkdir(exist_ok=True)  # raises when `path` is a file


def private_file(path: Path) -> bool:
    """Create `path` empty and private to the user (mode 0600, whatever the umask) unless it
    exists; False when it did (it is left untouched).

    Raises:
        OSError: the file cannot be created.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return True


def _regular_target(path: Path) -> Path:
    """The file `path` names, symlinks resolved; refuses a device, FIFO, socket or folder.

    Raises:
        ExportError: `path` exists but is no regular file (replacing it would destroy it).
    """
    try:
        target = path.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise ExportError(f"cannot write {path}: its symlinks cannot be resolved") from exc
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target  # a new file (or a dangling link's new target)
    except OSError:
        return target  # writing it reports the problem
    if not stat.S_ISREG(mode):
        raise ExportError(f"cannot write {path}: it is not a regular file")
    return target
