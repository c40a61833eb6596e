"""ling-chat's own log: a private file that holds the `app` loggers' records, tracebacks too."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from app.core.errors import ConfigError
from app.plumbing.logfile import log_file, logging_to


def test_the_log_holds_a_bugs_traceback_in_a_private_file_while_the_block_runs(
    tmp_path: Path,
) -> None:
    with logging_to(tmp_path / "data" / "logs") as path:
        assert log_file() == path
        try:
            raise KeyError("lost")
        except KeyError:
            logging.getLogger("app.ui.some_module").exception("a bug")
    logging.getLogger("app.ui.some_module").error("after the block")
    assert log_file() is None
    text = path.read_text(encoding="utf-8")
    assert "app.ui.some_module ERROR: a bug" in text
    assert "Traceback (most recent call last)" in text and "KeyError: 'lost'" in text
    assert "after the block" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_a_log_folder_that_cannot_be_made_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "data"
    blocker.write_text("a file where the folder goes")
    with (
        pytest.raises(ConfigError, match=r"^cannot write ling-chat's log in .*data/logs: "),
        logging_to(blocker / "logs"),
    ):
        pass
    assert log_file() is None
