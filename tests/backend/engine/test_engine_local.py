"""The engine's CPU-side parts: model path checks, refusals, plans, and a missing SGLang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.backend.engine.patches.boundary import PLAN_ENV, PatchPlan, refusal
from app.backend.engine.setup import check_model_path
from app.backend.engine.sglang_log import SGLangLog, last_error, logging_config
from app.core.errors import BackendError, ModelNotFound
from app.core.proof_report import Verdict
from tests.support.timeouts import scaled


def test_missing_local_model_path_is_one_line(tmp_path):
    with pytest.raises(ModelNotFound, match="does not exist"):
        check_model_path(str(tmp_path / "nope"))
    with pytest.raises(ModelNotFound, match="has no config.json"):
        check_model_path(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    check_model_path(str(tmp_path))


def test_hugging_face_ids_are_left_to_sglang(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no folder of that name here
    with pytest.raises(ModelNotFound, match="does not exist"):
        check_model_path("./inclusionAI/Ling-3.0-flash-fp4")
    check_model_path("inclusionAI/Ling-3.0-flash-fp4")  # the same name as a Hub id: not checked


async def test_a_dspark_start_refuses_a_missing_local_draft_before_sglang(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    draft = tmp_path / "draft"
    check_model_path(str(tmp_path), ["inclusionAI/Ling-3.0-flash-dspark"])  # fetched at start
    config = EngineConfig(str(tmp_path), profile="dspark", dspark_draft=str(draft))
    with pytest.raises(ModelNotFound, match=f"^draft model path {draft} does not exist$"):
        await anext(EngineBackend(config).start())
    draft.mkdir()
    with pytest.raises(ModelNotFound, match=f"^draft model path {draft} has no config.json$"):
        check_model_path(str(tmp_path), [str(draft)])


def test_a_refusal_raised_in_the_scheduler_becomes_a_failed_proof_line(tmp_path):
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    message = "the NEXTN draft's LM head is its own module, not the target's"
    error = refusal("shared_head", message)
    log = f"Scheduler hit an exception: Traceback...\nRuntimeError: {error}\n"
    report = backend._refusal(RuntimeError("Initialization failed. See the log."), log)
    assert report is not None and not report.ok
    (line,) = report.lines
    assert (line.key, line.verdict, line.evidence) == ("shared_head", Verdict.FAIL, message)
    assert line.fix


def test_an_ordinary_crash_is_not_a_refusal(tmp_path):
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    assert backend._refusal(RuntimeError("boom"), "CUDA out of memory\n") is None


def test_the_last_exception_in_the_log_is_the_cause_of_a_failed_start():
    log = (
        "2026-11-29 16:25:44,972 2399 sglang.srt.models.registry: Ignore import error: x\n"
        "Traceback (most recent call last):\n"
        '  File "scheduler.py", line 1, in run\n'
        "ValueError: an earlier, handled one\n"
        "Scheduler hit an exception: Traceback (most recent call last):\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "[2026-11-29 16:25:45] Received sigquit from a child process. It usually means the"
        " child failed.\n"
    )
    assert last_error(log) == "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert last_error("loading weights\nall fine\n") is None


def test_logging_goes_to_one_file_without_dropping_other_loggers(tmp_path):
    config = logging_config(tmp_path / "sglang.log")
    assert config["disable_existing_loggers"] is False
    assert config["handlers"]["file"]["filename"] == str(tmp_path / "sglang.log")


def test_the_patch_plan_reaches_the_child_through_the_environment(monkeypatch):
    plan = PatchPlan(patches=("sharing",), log_file="/x/sglang.log", min_head_speedup=1.3)
    monkeypatch.setenv(PLAN_ENV, plan.to_env())
    assert PatchPlan.from_env() == plan
    monkeypatch.delenv(PLAN_ENV)
    assert PatchPlan.from_env() == PatchPlan()


async def test_start_without_the_engine_extra_is_one_line(tmp_path, engine_not_installed):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": []}))
    backend = EngineBackend(EngineConfig(str(tmp_path), log_dir=tmp_path / "logs"))
    with pytest.raises(BackendError, match=r"pip install 'ling-chat\[engine\]'"):
        async for _stage in backend.start():
            pass
    await backend.shutdown()
    assert not Path(tmp_path / "logs" / "sglang.log").exists()


def test_a_log_folder_that_cannot_be_written_is_one_line(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the log folder should be")
    log = SGLangLog(blocker / "logs" / "sglang.log")
    with pytest.raises(BackendError, match="cannot write SGLang's log in .*not-a-folder"):
        log.prepare()


SPAWN_UNDER_TEXTUAL = """
import asyncio, multiprocessing, os, sys
from textual.app import App
from app.backend.engine.thread import EngineThread
from app.backend.engine.sglang_processes import start_resource_tracker

def spawn() -> int:  # what SGLang's Engine does from the engine thread
    child = multiprocessing.get_context("spawn").Process(target=os.getpid)
    child.start()
    child.join()
    return child.exitcode

async def main() -> None:
    async with App().run_test():  # Textual's print capture is sys.stderr from here on
        if sys.argv[1] == "fixed":
            start_resource_tracker()
        thread = EngineThread()
        try:
            print("exit code", await thread.call(spawn), file=sys.__stdout__)
        except ValueError as exc:
            print("failed:", exc, file=sys.__stdout__)
        thread.stop()

if __name__ == "__main__":
    asyncio.run(main())
"""


@pytest.mark.parametrize(
    ("mode", "outcome"),
    [("fixed", "exit code 0"), ("unfixed", "failed: bad value(s) in fds_to_keep")],
)
def test_the_engine_can_spawn_its_processes_inside_the_textual_app(
    end_to_end: None, tmp_path, mode, outcome
):
    script = tmp_path / "spawn_under_textual.py"
    script.write_text(SPAWN_UNDER_TEXTUAL)
    root = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, str(script), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert outcome in done.stdout, done.stdout + done.stderr
