"""The FP8 head method's class carries the name the proof looks for in the evidence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.levers.model.fp8_head import METHOD as FP8_HEAD_METHOD
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[4]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"


def test_the_head_method_class_is_named_as_the_proof_expects(end_to_end: None):
    """Built in a child over the torch and SGLang doubles, installed or not (no GPU here)."""
    code = (
        "from app.backend.engine.patches import fp8_head; print(fp8_head.method_class().__name__)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=scaled(60)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == FP8_HEAD_METHOD
