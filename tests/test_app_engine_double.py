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

ROOT = Path(__file__).resolve().parents[1]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"


def test_a_chat_on_the_engine_starts_streams_and_leaves_no_process_behind(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(DOUBLE / "chat_session.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["screen"] == "ChatScreen", result["exit"]
    assert result["reply"] == {
        "status": "complete",
        "content": "Hello from the double.",
        "accept": 4.0,
    }
    assert result["children_while_chatting"] >= 1  # the scheduler process was up
    assert result["children_left"] == []
    log = (tmp_path / "sglang.log").read_text()
    assert "scheduler double up: moe_runner_backend=humming" in log  # child output -> log
