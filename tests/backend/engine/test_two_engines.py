"""Two in-process engines in one process, as `lab/scripts/gpu_stack_ab.py` runs them.

SGLang is the engine double (`tests/fixtures/engine_double`), with its spawned scheduler
process; the engines, their boots, their processes and the process's signals are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[3]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"


def test_shutting_one_engine_down_leaves_the_other_answering(end_to_end: None, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, str(DOUBLE / "two_engines.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(180),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["children_up"], result["children_after_first"]) == (2, 1)
    assert result["second_reply"] == {"answer": "Hello from the double.", "end": "ReplyDone"}
    assert result["children_left"] == 0
    # Booted at once, each scheduler got its own engine's plan: its log and FP8 head.
    assert result["logs"] == {
        "first": [
            "scheduler double up: moe_runner_backend=humming fp8_head=True draft_own_shards=True"
        ],
        "second": [
            "scheduler double up: moe_runner_backend=humming fp8_head=False draft_own_shards=True"
        ],
    }
