"""The resident engine (`keep_engine`) through the product's chat path, on the GPU machine.

On the 6-layer known-answer model (its weights written by the test-only scheduler entry,
tests/gpu/known_answer.py, which the detached `ling-chat serve --resident` runs through
`spawn.SERVE_COMMAND`; load_format=dummy):

  1. nvidia-smi's used memory before anything starts
  2. cold: a fresh process runs the chat's own backend choice (`--keep-engine 60s`): the
     resident engine starts detached, loads and proves itself; the app (Pilot, headless)
     reaches its composer and streams the known answer. Timed from the process start to
     the composer ("COLD launch-to-composer").
  3. the chat quits; the engine stays (pid alive, nvidia-smi shows its memory)
  4. attach: a second fresh process finds it, re-checks every proof line and a warm-up
     reply, reaches the composer ("ATTACH launch-to-composer", goal <= 5 s) and streams the
     known answer; every proof line is printed; torch and sglang were never imported
  5. `ling-chat engine status`
  6. the idle timeout passes: the engine stops itself; nvidia-smi's memory after

    python lab/scripts/gpu_resident_bench.py WORK_DIR
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = str(Path(__file__).resolve())
ROOT = Path(SCRIPT).parents[2]
sys.path.insert(0, str(ROOT))

IDLE = "60s"
QUESTION = "What did each lever do?"
"""Any question: the known-answer model answers every one with the known answer."""
GOAL_S = 5.0


def serve_entry(argv: list[str]) -> int:
    """The detached engine: `ling-chat serve --resident ...` on the known-answer entry."""
    from app.backend.engine import patches
    from app.cli import main
    from tests.gpu import known_answer

    patches.run_scheduler_process = known_answer.run_scheduler_process
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1"
    return main(argv)


def chat_entry(model: str, data: str, shot: str) -> int:
    """One launch of the chat, headless: the product's backend choice, then the app."""
    import asyncio

    from app.backend.resident import spawn
    from app.cli import build_parser
    from app.commands import chat
    from app.commands.common import settings_from
    from tests.gpu import models
    from tests.gpu.app_chat import chat_through_app

    spawn.SERVE_COMMAND = [sys.executable, SCRIPT, "--serve"]
    argv = ["--keep-engine", IDLE, "--model", model, "--data-dir", data]
    argv += ["--mem-fraction", str(models.mem_fraction()), "--sglang-arg", "load_format=dummy"]
    args = build_parser().parse_args(argv)
    settings = settings_from(args)
    backend = chat._backend(args, settings)
    asyncio.run(chat_through_app(backend, settings.db_path, (QUESTION,), Path(shot)))
    report = asyncio.run(backend.proof())
    for line in report.lines:
        print(f"proof line: {line.verdict.value:4}  {line.title}: {line.evidence}")
    print(f"proof: {report.summary()} ok={report.ok}")
    with sqlite3.connect(settings.db_path) as db:
        kinds = [kind for (kind,) in db.execute("SELECT kind FROM engine_runs ORDER BY id")]
    print(f"stored engine runs' kinds (each reply links to one): {kinds}")
    print(
        f"backend kind: {backend.info.kind}; torch imported: {'torch' in sys.modules}; "
        f"sglang imported: {'sglang' in sys.modules}"
    )
    return 0 if report.ok else 2


def launch(model: Path, data: Path, shot: Path, what: str) -> float | None:
    """Run one chat launch, its history in a fresh `data` (the app driver wants one); its
    launch-to-composer seconds (None: it never got there)."""
    began = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, SCRIPT, "--chat", str(model), str(data), str(shot)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    ready = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if ready is None and "chat screen up" in line:
            ready = time.perf_counter() - began
            print(f"{what} launch-to-composer: {ready:.2f} s", flush=True)
        print(f"    {line.rstrip()}", flush=True)
    status = proc.wait()
    print(f"{what} chat exited {status} after {time.perf_counter() - began:.1f} s", flush=True)
    log = data / "logs" / "resident.log"
    if status != 0 and log.is_file():  # the detached engine's own output: why it stopped
        print(f"the end of {log}:\n{log.read_text(errors='replace')[-4000:]}", flush=True)
    return ready if status == 0 else None


def gpu_used() -> str:
    answer = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=False,
    )
    return answer.stdout.strip() or answer.stderr.strip()


def engine(action: str, data: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "app", "engine", action, "--data-dir", str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout + done.stderr


def main() -> int:
    if sys.argv[1] == "--serve":
        return serve_entry(sys.argv[2:])
    if sys.argv[1] == "--chat":
        return chat_entry(*sys.argv[2:5])
    from app.backend.resident import process
    from app.backend.resident.state import read_state, runtime_dir
    from tests.gpu import models

    work = Path(sys.argv[1])
    model, data = work / "m6ka", work / "data"
    os.environ.setdefault("LING_CHAT_RUNTIME_DIR", str(work / "run"))
    models.write_model_dir(model, models.layers(), known_answer=True)
    out = Path(os.environ.get("OUT", "/tmp"))
    print(f"GPU memory before: {gpu_used()}", flush=True)
    try:
        cold = launch(model, data / "cold", out / "resident-cold.svg", "COLD")
        state = read_state(runtime_dir())
        print(
            f"after quitting: state file {'present' if state else 'MISSING'}; engine pid "
            f"{state.pid if state else '-'} alive: {bool(state and process.alive(state.pid))}"
        )
        print(f"GPU memory with the engine resident: {gpu_used()}", flush=True)
        attach = launch(model, data / "attach", out / "resident-attach.svg", "ATTACH")
        print(engine("status", data), flush=True)
        if state is None:
            return 1
        began = time.perf_counter()
        while process.alive(state.pid) and time.perf_counter() - began < 240:
            time.sleep(1)
        stopped = not process.alive(state.pid)
        print(
            f"idle stop: engine pid {state.pid} {'gone' if stopped else 'STILL ALIVE'} "
            f"{time.perf_counter() - began:.0f} s after the attached chat quit (idle {IDLE})"
        )
        time.sleep(3)
        print(f"GPU memory after the idle stop: {gpu_used()}", flush=True)
        print(engine("status", data), flush=True)
    finally:
        print(engine("stop", data), flush=True)  # nothing left behind, whatever happened
    fast = attach is not None and attach <= GOAL_S
    cold_text = f"{cold:.2f}" if cold is not None else "FAILED"
    attach_text = f"{attach:.2f}" if attach is not None else "FAILED"
    print(
        f"RESULT cold {cold_text} s, attach {attach_text} s (goal <= {GOAL_S:g} s: "
        f"{'met' if fast else 'NOT met'}), idle stop {'ok' if stopped else 'FAILED'}"
    )
    return 0 if cold is not None and attach is not None and stopped else 1


if __name__ == "__main__":
    sys.exit(main())
