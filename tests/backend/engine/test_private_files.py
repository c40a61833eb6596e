"""Everything ling-chat creates is private to the user, even under a permissive umask."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.backend.engine.boot.load_progress import LoadProgress, write_progress
from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.backend.replay import RecordingBackend
from app.storage import ChatStore, MessageStatus
from tests.support.scripted_backend import ScriptedBackendDouble
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[3]


pytestmark = pytest.mark.usefixtures("permissive_umask")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_history_its_side_files_folders_and_backups_are_private(tmp_path: Path) -> None:
    db_path = tmp_path / "data" / "nested" / "history.db"
    with ChatStore.open(db_path) as store:
        chat = store.create_conversation("t")
        writer = store.start_reply(chat.id)
        writer.append(answer="a")
        writer.finish(MessageStatus.COMPLETE)
        side = [db_path.with_name(f"history.db{suffix}") for suffix in ("-wal", "-shm")]
        assert all(path.exists() for path in side)
        files = {path: mode(path) for path in (db_path, *side)}
        store.backup(tmp_path / "backup.db")
    assert files == dict.fromkeys(files, 0o600)
    assert mode(tmp_path / "backup.db") == 0o600
    assert mode(tmp_path / "data") == mode(tmp_path / "data" / "nested") == 0o700


def test_a_history_that_exists_keeps_its_mode(tmp_path: Path) -> None:
    db_path = tmp_path / "history.db"
    ChatStore.open(db_path).close()
    db_path.chmod(0o640)
    ChatStore.open(db_path).close()
    assert mode(db_path) == 0o640


def test_the_log_folder_and_sglangs_log_are_private(tmp_path: Path) -> None:
    backend = EngineBackend(EngineConfig(str(tmp_path), log_dir=tmp_path / "data" / "logs"))
    backend.log.prepare()
    assert mode(tmp_path / "data") == mode(tmp_path / "data" / "logs") == 0o700
    logs = list((tmp_path / "data" / "logs").iterdir())
    assert {path.name for path in logs} == {"sglang.log", "sglang.logging.json"}
    assert {mode(path) for path in logs} == {0o600}


def test_the_load_progress_the_scheduler_writes_is_private(tmp_path: Path) -> None:
    path = tmp_path / "load-progress.json"
    write_progress(path, LoadProgress("read", 1, 2, 1.0))
    write_progress(path, LoadProgress("read", 2, 2, 2.0))  # replaced: the new file is private too
    assert mode(path) == 0o600


def test_the_log_the_scheduler_writes_its_output_to_is_private(
    end_to_end: None, tmp_path: Path
) -> None:
    log = tmp_path / "scheduler.log"
    script = (
        "import sys; from app.backend.engine.patches import redirect_output; "
        "redirect_output(sys.argv[1])"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(log)], cwd=ROOT, check=True, timeout=scaled(60)
    )
    assert mode(log) == 0o600


async def test_a_recording_and_its_folder_are_private(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "session.json"
    recorder = RecordingBackend(ScriptedBackendDouble(clock=time.perf_counter), path)
    _ = [stage async for stage in recorder.start()]
    assert recorder.save_error is None
    assert mode(path.parent) == 0o700
    assert mode(path) == 0o600
