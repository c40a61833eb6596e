"""Print what is installed and the preflight, start the engine (compiling its kernels first
when they are not cached), print the proof that every optimization is engaged, and stop."""

from __future__ import annotations

import argparse
import asyncio
import shutil
from collections.abc import Callable
from importlib import metadata

from app.backend.engine.config import draft_models
from app.backend.protocol import ChatBackend
from app.commands.common import add_data_arguments, add_model_arguments, launch_plan_from
from app.core.proof_report import ProofReport
from app.render.proof import format_report

PACKAGES = ("sglang", "sglang-kernel", "torch", "humming-kernels", "flashinfer-python")
"""The engine's packages; SGLang 0.5.23 itself requires sglang-kernel and flashinfer-python."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from app import launch
    from app.backend.engine.sglang_log import route_sglang_logging
    from app.plumbing.to_log import output_to_log

    print(environment())
    plan = launch_plan_from(args)
    log_file = plan.settings.log_dir / "sglang.log"
    route_sglang_logging(log_file)
    # From the preflight on (it imports the lever packages, and torch with them), whatever
    # a package prints goes to the log; the terminal gets the doctor's own lines.
    with output_to_log(log_file) as terminal:

        def say(line: str) -> None:
            print(line, file=terminal)

        backend = launch.engine_backend(
            plan, gpu=False, show=lambda line: say(f"preflight: {line}")
        )
        for model in [plan.settings.model_path, *draft_models([plan.config])]:
            launch.fetch_model(model, terminal)  # a text bar here, not a line per stage
        report = asyncio.run(run_doctor(backend, say))
    return 0 if report.ok else 2


def environment() -> str:
    """The engine packages' versions and the CUDA compiler that JIT builds need.

    Information only: the proof, read from the running model, decides. It says where to
    look when the engine refuses, e.g. without FlashInfer NEXTN cannot sample.
    """
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} NOT INSTALLED")
    nvcc = shutil.which("nvcc")
    return (
        "installed: " + " · ".join(versions) + "\n"
        f"nvcc: {nvcc or 'not on PATH'} (FlashInfer builds its kernels with it on first use)"
    )


async def run_doctor(backend: ChatBackend, out: Callable[[str], None] = print) -> ProofReport:
    """Start `backend` showing each stage, print its proof report, shut it down."""
    try:
        async for stage in backend.start():
            state = "done" if stage.done else "..."
            detail = f"  {stage.detail}" if stage.detail and not stage.done else ""
            out(f"[{stage.elapsed_s:6.1f}s] {stage.name} {state}{detail}")
        report = await backend.proof()
        out(format_report(report))  # before the shutdown, which can take seconds
    finally:
        await backend.shutdown()
    return report
