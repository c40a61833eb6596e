"""The real app on the real engine backend in a fresh process, with SGLang as a test double.

`tests/fixtures/engine_double` stands in for SGLang (and torch) with SGLang's process
model: the Engine, built on ling-chat's engine thread inside the running Textual app,
spawns its scheduler process. This is where the app and SGLang meet outside the model
(spawning under Textual's captured stderr, the child's log, the proof from the init info,
shutting the children down), so it runs on every CI machine, not only on the GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
FULL_REPLY = "Hello from the double."


def session(work: Path, mode: str) -> tuple[dict[str, Any], str]:
    """Run one session; its JSON result and its stderr (where the exit message goes)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(DOUBLE / "chat_session.py"), str(work), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(180),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Task was destroyed but it is pending" not in done.stderr
    assert "Future exception was never retrieved" not in done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["children_left"] == []
    return result, " ".join(done.stderr.split())  # Rich wraps the message at 80 columns


def chatted(work: Path, mode: str) -> dict[str, Any]:
    """A session that reached the chat (or quit on purpose) and exited cleanly."""
    result, printed = session(work, mode)
    assert "ling-chat: error" not in printed and result["return_code"] == 0
    assert result["children_before_quit"] >= 1  # the scheduler process was up
    return result


def test_a_chat_starts_streams_and_leaves_no_process_behind(end_to_end: None, tmp_path):
    result = chatted(tmp_path, "chat")
    assert result["screen"] == "ChatScreen"
    assert result["draft"] == "draft    3 steps · 4 tokens"
    assert result["replies"] == [
        {"status": "complete", "content": FULL_REPLY, "accept": 4.0, "error": None}
    ]
    log = (tmp_path / "sglang.log").read_text()
    assert "scheduler double up: moe_runner_backend=humming" in log  # child output -> log


def test_the_start_screen_shows_the_load_the_scheduler_records(end_to_end: None, tmp_path):
    """The scheduler writes the recorded load progress; the real engine backend reads it and
    the start screen shows each stage, the bytes read of the total, the rate, the time left."""
    result = chatted(tmp_path, "load_progress")
    assert result["screen"] == "ChatScreen"
    lines = result["load_lines"]
    assert "Reading weights  12.4 of 66.0 GB  2.1 GB/s  about 26 s left" in lines
    assert "Reading weights  41.3 of 66.0 GB  2.1 GB/s  about 12 s left" in lines
    later = [line for line in lines if not line.startswith("Reading")]
    assert later == [
        "Processing the weights",
        "Repacking the MoE weights for Humming",
        "Quantizing the LM head to FP8",
        "Capturing CUDA graphs",
    ]
    assert not list(tmp_path.glob(".load-progress.json.*"))  # replaced whole, no half file left


def test_the_speed_panel_shows_the_draft_steps_the_scheduler_runs(end_to_end: None, tmp_path):
    # speculative_num_steps=2 reaches SGLang, whose top-1 draft worker then verifies 3
    # tokens (the args still ask for 4): the running scheduler's facts are what is shown.
    result = chatted(tmp_path, "two_draft_steps")
    assert result["screen"] == "ChatScreen"
    assert result["draft"] == "draft    2 steps · 3 tokens"


def test_quitting_mid_reply_keeps_what_arrived_and_stops_the_engine(end_to_end: None, tmp_path):
    (reply,) = chatted(tmp_path, "quit_mid_reply")["replies"]
    assert reply["status"] == "stopped"
    assert reply["content"] and FULL_REPLY.startswith(reply["content"])
    assert reply["content"] != FULL_REPLY


def test_quitting_while_the_model_loads_stops_the_loading_engine(end_to_end: None, tmp_path):
    result = chatted(tmp_path, "quit_while_loading")
    assert result["screen"] == "StartupScreen"
    assert result["replies"] == []
    assert result["quit_s"] < 10


def test_a_scheduler_that_dies_mid_reply_ends_it_in_an_error_and_the_app_stays(
    end_to_end: None, tmp_path
):
    result = chatted(tmp_path, "scheduler_dies_mid_reply")
    assert result["screen"] == "ChatScreen"
    (reply,) = result["replies"]
    assert reply["status"] == "error"
    assert reply["content"] and FULL_REPLY.startswith(reply["content"])
    assert "scheduler died" in reply["error"]


def test_a_refusal_raised_while_loading_shows_the_report_and_exits_with_2(
    end_to_end: None, tmp_path
):
    result, printed = session(tmp_path, "refused_at_load")
    assert result["screen"] == "StartupScreen"
    assert result["return_code"] == 2
    (line,) = result["report"]["lines"]
    assert (line["key"], line["verdict"]) == ("shared_head", "fail")
    assert line["evidence"] == "the NEXTN draft's LM head is its own module, not the target's"
    assert line["fix"] and "Draft shares the target's LM head module" in printed


def test_a_crash_while_loading_is_one_line_with_its_cause_not_an_old_refusal(
    end_to_end: None, tmp_path
):
    session(tmp_path, "refused_at_load")  # the log now holds an earlier run's refusal
    result, printed = session(tmp_path, "out_of_memory_at_load")
    assert result["return_code"] == 1
    assert "SGLang failed to start (MemoryError: CUDA out of memory" in printed


def test_an_engine_that_cannot_sample_refuses_to_start_with_the_cause(end_to_end: None, tmp_path):
    # Greedy NEXTN passed on the H200 without FlashInfer; the first sampled verify killed
    # SGLang's scheduler. The sampled warm-up finds that before the user's first message.
    result, printed = session(tmp_path, "cannot_sample")
    assert result["return_code"] == 1
    assert result["replies"] == []
    assert (
        "the sampled warm-up reply failed: SGLang's scheduler died "
        "(ModuleNotFoundError: No module named 'flashinfer')" in printed
    )
