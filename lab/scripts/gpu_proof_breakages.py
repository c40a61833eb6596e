"""The proof's breakages through the product's own start path, on the GPU machine.

Each case runs `ling-chat doctor` (app.cli.main, in a fresh process) on the 6-layer
known-answer model, its weights written by the test-only scheduler entry
(tests/gpu/known_answer.py), and prints its exit status and the line that names its cause.
Cheapest first:

  moe-triton        --sglang-arg moe_runner_backend=triton: refused before loading (exit 2)
  no-graphs-flag    --sglang-arg disable_cuda_graph=true: refused before loading (exit 2)
  torch-native      --sglang-arg attention_backend=torch_native (which SGLang refused only
                    once the weights had loaded): refused before loading (exit 2)
  simulated-accept  SGLANG_SIMULATE_ACC_LEN=3.5 (refused by the proof only after a boot):
                    refused before loading (exit 2)
  humming-hidden    `import humming` fails (a shadow package first on PYTHONPATH): the
                    preflight's lever-package line (exit 3), before the GPU is touched
  stack             the stack passes every line; the graphs line states prefill off (exit 0)
  graphs-off        decode graphs disabled past the override check (as a Python caller
                    could): the running model's graphs line is the first failure (exit 2)
  caches-truncated  every Humming cubin, the smallest FlashInfer module and five Triton
                    cubins truncated to 0 bytes: healed with a line each, prepared again,
                    and the stack passes every line (exit 0)

    python scripts/gpu_proof_breakages.py MODEL_DIR DATA_DIR [CASE ...]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

CASES = {  # name: (ling-chat doctor flags, limit in seconds, the exit status it must end with)
    "moe-triton": (["--sglang-arg", "moe_runner_backend=triton"], 120, 2),
    "no-graphs-flag": (["--sglang-arg", "disable_cuda_graph=true"], 120, 2),
    "torch-native": (["--sglang-arg", "attention_backend=torch_native"], 120, 2),
    "simulated-accept": ([], 120, 2),
    "humming-hidden": ([], 120, 3),
    "stack": ([], 300, 0),
    "graphs-off": (["--sglang-arg", "cuda_graph_backend_decode=disabled"], 300, 2),
    "caches-truncated": ([], 540, 0),
}
CAUSE = (
    "ling-chat: error:",
    "preflight: FAIL",
    "FAIL  ",
    "captured:",
    "truncated to 0 bytes",
    "removed ",
    "engine ran with:",
    "ready:",
    "refused to start",
)
"""Lines that name a case's cause or outcome (the rest of its output goes to its log)."""
SHADOW = Path("/tmp/ling-chat-no-humming")


def truncate(paths: list[Path]) -> int:
    for path in paths:
        path.write_bytes(b"")
    return len(paths)


def break_caches() -> str:
    """Truncate the kernel caches' binaries as a full disk or a killed first start would."""
    from app.backend.engine.kernel_cache import caches

    found = caches(os.environ)
    humming = [p for c in found if c.name == "Humming" for p in c.root.rglob("kernel.cubin")]
    flashinfer = sorted(
        (p for c in found if c.name == "FlashInfer JIT" for p in c.root.rglob("*.so")),
        key=lambda p: p.stat().st_size,
    )[:1]
    triton = [p for c in found if c.name == "Triton" for p in c.root.rglob("*.cubin")][:5]
    return (
        f"truncated to 0 bytes: {truncate(humming)} Humming cubins, "
        f"{truncate(flashinfer)} FlashInfer modules ({', '.join(p.name for p in flashinfer)}), "
        f"{truncate(triton)} Triton cubins"
    )


def doctor(case: str, model: Path, data: Path) -> int:
    """One case, in this process: the known-answer entry, then `ling-chat doctor`."""
    from app.backend.engine import patches
    from app.cli import main
    from app.levers import refusals
    from tests.gpu import known_answer, models

    patches.run_scheduler_process = known_answer.run_scheduler_process
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1"
    if case == "graphs-off":
        refusals.refusal = lambda profile, context, overrides, env: None
    if case == "caches-truncated":
        print(break_caches(), flush=True)
    flags, _, _ = CASES[case]
    argv = ["doctor", "--model", str(model), "--data-dir", str(data)]
    argv += ["--mem-fraction", str(models.mem_fraction()), "--sglang-arg", "load_format=dummy"]
    return main([*argv, *flags])


def stop(proc: subprocess.Popen[str]) -> str:
    """Stop a case's process group (Ctrl+C, which stops SGLang; then SIGKILL); its output."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        return proc.communicate(timeout=30)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.communicate()[0]


def run_case(case: str, model: Path, data: Path, log_dir: Path) -> bool:
    """One case in a fresh process; prints its exit status and cause lines."""
    _, limit, want = CASES[case]
    env = dict(os.environ)
    if case == "humming-hidden":
        (SHADOW / "humming").mkdir(parents=True, exist_ok=True)
        (SHADOW / "humming" / "__init__.py").write_text(
            "raise ModuleNotFoundError(\"No module named 'humming' (hidden by the "
            "proof-breakages step)\", name='humming')\n"
        )
        env["PYTHONPATH"] = f"{SHADOW}:{env.get('PYTHONPATH', '')}"
    if case == "simulated-accept":
        env["SGLANG_SIMULATE_ACC_LEN"] = "3.5"
    t0 = time.perf_counter()
    argv = [sys.executable, __file__, "--case", case, str(model), str(data)]
    # Its own process group: a case past its limit is stopped with SGLang's children.
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=limit)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        output, status = stop(proc), 124
    except KeyboardInterrupt:  # the agenda's limit: the case's group goes too
        print(stop(proc)[-3000:])
        raise
    (log_dir / f"proof-{case}.log").write_text(str(output))
    lines = [line for line in str(output).splitlines() if any(m in line for m in CAUSE)]
    took = time.perf_counter() - t0
    ok = status == want
    print(f"CASE {case}: exit {status} (wants {want}) in {took:.0f} s {'ok' if ok else 'WRONG'}")
    for line in lines[:20]:
        print(f"    {line}")
    return ok


def main() -> int:
    if sys.argv[1] == "--case":
        return doctor(sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4]))
    from tests.gpu import models

    model, data = Path(sys.argv[1]), Path(sys.argv[2])
    models.write_model_dir(model, models.layers(), known_answer=True)
    log_dir = Path(os.environ.get("OUT", "/tmp"))
    wrong = [c for c in sys.argv[3:] or list(CASES) if not run_case(c, model, data, log_dir)]
    print(f"proof breakages: {'all as expected' if not wrong else 'WRONG: ' + ', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
