"""Writing a file whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from app.errors import ExportError


def write_atomic(path: Path, chunks: Iterable[str]) -> None:
    """Write text to `path` through a temporary file in the same folder and `os.replace`.

    Either the whole new text lands or the old file stays as it was; if producing the
    chunks raises, that exception propagates and no temporary file is left behind.
    A new file is private to the user (mode 0600).

    Raises:
        ExportError: the file could not be written.
    """
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ExportError(f"cannot write to {path.parent}: {exc.strerror}") from exc
    temp = Path(name)
    try:
        with open(fd, "w", encoding="utf-8") as handle:
            handle.writelines(chunks)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise ExportError(f"cannot write {path}: {exc.strerror}") from exc
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
