"""Every way out of the chat mid-reply on the in-process engine gives the GPU back.

`ling-chat` (`tests/gpu/chat_known_answer.py`: the product's CLI and engine, the known-answer
scheduler entry) on a pseudo-terminal that is its controlling terminal, 6 layers. Mid-reply
the terminal is closed (the kernel's SIGHUP to the app, and the shell's to its whole process
group, SGLang's processes with it) or the app gets SIGTERM. The app must be gone, SGLang's
processes with it, the reply stored as stopped, and nvidia-smi's used memory back to where it
was before the start. Each case prints one line with the times and the memory.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("sglang", reason="needs SGLang")
import psutil  # noqa: E402

from tests.gpu import models  # noqa: E402
from tests.support.pty_app import app_on_a_pty, wait_for  # noqa: E402

pytestmark = pytest.mark.gpu
MEMORY_SLACK_MIB = 64
"""How far above its level before the start the GPU's used memory may stay."""
FREED_WITHIN_S = 30.0


def gpu_memory_used_mib() -> int:
    """nvidia-smi's used memory of the GPU the engine runs on (the first visible one)."""
    index = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", index],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip())


@pytest.mark.parametrize("cause", ["window", "SIGTERM"])
def test_a_way_out_mid_reply_frees_the_gpu(tmp_path: Path, cause: str) -> None:
    model = models.write_model_dir(tmp_path / "model", known_answer=True)
    data = tmp_path / "data"
    args = ["--model", str(model), "--sglang-arg", "load_format=dummy", "--skip-preflight"]
    program = (sys.executable, "-m", "tests.gpu.chat_known_answer")
    before = gpu_memory_used_mib()
    with app_on_a_pty(args, data, program=program) as app:
        wait_for(lambda: b"Ask Ling" in app.screen, 600, "the chat (the engine loaded)")
        loaded = gpu_memory_used_mib()
        processes = psutil.Process(app.child.pid).children(recursive=True)
        os.write(app.leader, b"What did each lever do?\x13")
        wait_for(lambda: b"streaming" in app.screen, 60, "the reply")
        time.sleep(0.5)
        started = time.monotonic()
        app.end_by(cause)
        status = app.child.wait(timeout=60)
        gone_s = time.monotonic() - started
    _, alive = psutil.wait_procs(processes, timeout=FREED_WITHIN_S)
    after = gpu_memory_used_mib()
    while after > before + MEMORY_SLACK_MIB and time.monotonic() - started < FREED_WITHIN_S:
        time.sleep(0.5)
        after = gpu_memory_used_mib()
    freed_s = time.monotonic() - started
    with sqlite3.connect(data / "history.db") as db:
        (stored,) = db.execute("SELECT status FROM messages WHERE role = 'assistant'").fetchone()
    print(
        f"exit by {cause}: process gone in {gone_s:.2f} s (status {status}), SGLang's "
        f"{len(processes)} processes {'all gone' if not alive else f'{len(alive)} left'}, "
        f"reply {stored}; nvidia-smi memory.used {before} MiB before the start, {loaded} MiB "
        f"loaded, {after} MiB {freed_s:.1f} s after the exit"
    )
    assert status == (129 if cause == "window" else 143)
    assert processes and alive == []
    assert stored == "stopped"
    assert after <= before + MEMORY_SLACK_MIB
