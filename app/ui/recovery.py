"""`RecoveryFile`: replies the history could not take, kept in a Markdown file where there is
room (next to the history, else the home folder, else the temporary folder)."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from app.core.errors import ExportError
from app.files import write_atomic
from app.ui.reply import ReplyRun, recovery_markdown


class RecoveryFile:
    """One file per session, rewritten with the replies still unsaved, removed once none is."""

    def __init__(self, db_path: Path, folders: Sequence[Path] | None = None) -> None:
        self.name = f"unsaved-replies-{datetime.now():%Y%m%d-%H%M%S}.md"
        """The file's name, in whichever folder takes it."""
        self._folders = tuple(folders or (db_path.parent, Path.home(), Path(tempfile.gettempdir())))
        self.path: Path | None = None
        """Where the unsaved replies are now, if anywhere."""

    def keep(self, runs: Sequence[ReplyRun]) -> Path:
        """Write `runs` to the first folder with room; the file's path.

        Raises:
            ExportError: no folder could take it (the one line names each failure).
        """
        text = recovery_markdown(runs)
        failures = []
        for folder in dict.fromkeys((*([self.path.parent] if self.path else []), *self._folders)):
            path = folder / self.name
            try:
                write_atomic(path, [text], replace=path == self.path)
            except ExportError as error:
                failures.append(str(error))
                continue
            if self.path is not None and self.path != path:
                self.path.unlink(missing_ok=True)
            self.path = path
            return path
        raise ExportError("; ".join(failures))

    def update(self, runs: Sequence[ReplyRun]) -> str | None:
        """Keep `runs` (the replies still unsaved) or, with none left, remove the file; the
        notice to show, if any."""
        if not runs:
            self.clear()
            return None
        try:
            path = self.keep(runs)
        except ExportError as error:
            return f"Nor could the reply be written to a file: {error}"
        return f"Until the history can take it, the reply's text is in {path}"

    def clear(self) -> None:
        """Every reply is in the history now: remove the file."""
        if self.path is not None:
            self.path.unlink(missing_ok=True)
            self.path = None
