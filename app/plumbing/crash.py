"""An unexpected error: its traceback (no local variables) to a log file, one line to the user."""

from __future__ import annotations

import os
import tempfile
import traceback
from datetime import datetime
from pathlib import Path

from app.plumbing.logfile import LOG_NAME
from app.plumbing.redact import redact


def crash_line(error: BaseException, log_dir: Path | None) -> str:
    """Append `error`'s traceback to ling-chat's log; the one line that names it and the log."""
    what = redact(f"{type(error).__name__}: {' '.join(str(error).split())}")[:300]
    path = _write(error, log_dir)
    where = f"the details are in {path}" if path else "its details could not be written"
    return f"ling-chat: unexpected error ({what}); {where}"


def _write(error: BaseException, log_dir: Path | None) -> Path | None:
    """The log the traceback went to: `log_dir`'s, else the temp folder's; None if neither."""
    entry = f"--- {datetime.now().isoformat(timespec='seconds')}\n" + redact(
        "".join(traceback.format_exception(error))
    )
    for folder in (log_dir, Path(tempfile.gettempdir())):
        if folder is None:
            continue
        path = folder / LOG_NAME
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as log:
                log.write(entry)
        except OSError:
            continue
        return path
    return None
