"""Host time of one KDA ReplaySSM commit on this CPU: SGLang 0.5.23's own commit against
ling-chat's fed the verify's prepared indices (app/backend/engine/patches/host/commit.py).

Both run on CPU tensors of a batch-1 verify (tests/support/commit_cases.py), with the KDA
kernels' entry replaced by a no-op, so what is timed is the Python and torch dispatch around
the kernels: SGLang's branch recomputes the step indices with eager ops, the fed commit takes
the ones the verify's fused kernel already made (that kernel runs in both cases, so it is not
timed). On a GPU each eager op is also a kernel launch; lab/scripts/gpu_host_time.py measures
the round there. Prints microseconds a call, median of --repeats batches of --calls.

    TRITON_INTERPRET=1 python lab/scripts/commit_host_cost.py [--calls N] [--repeats N] [--json F]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backend.engine.patches.host.commit import commit_fed_prepared  # noqa: E402
from tests.support import commit_cases  # noqa: E402


def per_call_us(fn, calls: int, repeats: int) -> tuple[float, list[float]]:
    """Median microseconds a call over `repeats` batches of `calls`, and each batch's."""
    batches = []
    for _ in range(repeats):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        batches.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(batches), batches


def cpu_model() -> str:
    """This CPU's model name."""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch
    from sglang.kernels.ops.attention.linear import kda_replayssm_spec_decode as kda

    torch.set_num_threads(1)
    spec_utils = commit_cases.sglang_without_globals()
    stock = spec_utils.commit_mamba_states_after_verify
    fed = commit_fed_prepared(stock)
    kda.commit_kda_replayssm_after_verify = lambda **_kwargs: None
    rows = {}
    for tracking in (True, False):
        case = commit_cases.Case(
            accept=(3,), seq_lens=(2047,), req_pool_indices=(5,), tracking=tracking
        )
        steps = commit_cases.prepared(case)
        worker, batch = commit_cases.worker_and_batch(case)
        _predict, index, lens, _seq = commit_cases.verify_outputs(case)
        for name, commit, given in (("sglang", stock, None), ("fed", fed, steps)):

            def call(commit=commit, given=given, args=(worker, batch, lens, index)):
                commit(*args, commit_cases.DRAFT_TOKENS, prepared_step_indices=given)

            call()
            median, batches = per_call_us(call, args.calls, args.repeats)
            label = f"{name}, tracking {'on' if tracking else 'off'}"
            rows[label] = {
                "us_per_call": round(median, 2),
                "batches_us": [round(b, 2) for b in batches],
            }
            spread = f"{min(batches):.2f}-{max(batches):.2f}"
            print(f"{label:26} {median:8.2f} us a commit (batches {spread})")
    result = {
        "kind": "measurement",
        "what": "one batch-1 KDA ReplaySSM commit's host time on CPU tensors, the KDA kernels' "
        "entry a no-op (SGLang's commit: mambaish_config and mamba_track_grid pinned to "
        "constants, so its time is a floor)",
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "rows": rows,
    }
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
