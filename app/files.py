"""Every file ling-chat writes: whole or not at all, never through a symbolic link, private
to the user (files 0600, folders 0700, whatever the umask).

A file is written to a temporary file in its folder, then renamed into place; a rename
replaces the folder's entry, never what a link there points to. A link at the target,
dangling or not, is refused, as is anything but a regular file; an existing file is
replaced only when asked (`replace=True`), else the new file is linked into place, which
fails rather than overwrite one that appeared meanwhile.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from app.core.errors import ExportError, TargetExists


def write_atomic(path: Path, chunks: Iterable[str], *, replace: bool, sync: bool = True) -> None:
    """Write text to `path`, whole or not at all (module docstring).

    If producing the chunks raises, that exception propagates, the old file stays as it
    was and no temporary file is left behind.

    Args:
        replace: replace an existing regular file (else `TargetExists`).
        sync: flush the text to the disk before the rename (False for snapshots that a
            crash may lose, written several times a second).

    Raises:
        TargetExists: `path` exists and `replace` is False.
        ExportError: the file cannot be written, or `path` is a link or no regular file.
    """
    with new_file(path, replace=replace) as temp, open(temp, "w", encoding="utf-8") as handle:
        handle.writelines(chunks)
        handle.flush()
        if sync:
            os.fsync(handle.fileno())


@contextmanager
def new_file(path: Path, *, replace: bool) -> Iterator[Path]:
    """A private, empty temporary file beside `path` for the caller to fill (e.g. SQLite's
    `VACUUM INTO`); when the block ends without an exception it becomes `path`, else it
    is removed. The same rules as `write_atomic`.

    Raises:
        TargetExists: `path` exists and `replace` is False.
        ExportError: the file cannot be written, or `path` is a link or no regular file.
    """
    _check_target(path, replace=replace)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write to {path.parent}: {exc.strerror}") from exc
    os.close(fd)
    temp = Path(name)
    try:
        yield temp
        _publish(temp, path, replace=replace)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror}") from exc
    finally:
        temp.unlink(missing_ok=True)


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
    exists; False when it did (it is left untouched). A link there is never followed.

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


def _check_target(path: Path, *, replace: bool) -> None:
    """Refuse a link or anything but a regular file at `path`, and a file unless `replace`.

    Raises:
        TargetExists, ExportError: as `write_atomic`.
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror}") from exc
    if stat.S_ISLNK(mode):
        raise ExportError(
            f"cannot write {path}: it is a symbolic link, and ling-chat never writes through "
            "one (name the file itself)"
        )
    if not stat.S_ISREG(mode):
        raise ExportError(f"cannot write {path}: it is not a regular file")
    if not replace:
        raise TargetExists(f"{path} exists already")


_NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EACCES)
"""What `link` fails with on a file system without hard links (FAT, some network mounts)."""


def _publish(temp: Path, path: Path, *, replace: bool) -> None:
    """Move the filled `temp` to `path`: a rename, or without `replace` a link that fails
    on anything already there (a link included); `temp` is left for the caller to remove.

    Raises:
        TargetExists: `path` appeared meanwhile and `replace` is False.
        OSError: the file system refused.
    """
    if replace:
        os.replace(temp, path)
        return
    try:
        os.link(temp, path, follow_symlinks=False)
    except FileExistsError:
        raise TargetExists(f"{path} exists already") from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        # No hard links here: claim the name (O_EXCL fails on anything there, a link
        # included), then rename over the claimed, empty file.
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            raise TargetExists(f"{path} exists already") from None
        os.replace(temp, path)
