"""`ling-chat`'s chat with the in-process engine on the known-answer model, through the test
scheduler entry (GPU tests run it as a process on a terminal).

    python -m tests.gpu.chat_known_answer ARGS...   (the arguments after `ling-chat`)

Everything is the product's (the CLI, the checks before a start, the app, the engine
backend, SGLang's processes) except the engine's scheduler entry: `known_answer.engine`,
dummy weights overwritten with the known answer, the tests' context and memory share.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from app import launch
from app.backend.protocol import ChatBackend
from app.cli import main
from tests.gpu import known_answer


def known_answer_engine(
    plan: launch.LaunchPlan, *, gpu: bool = True, show: Callable[[str], None] | None = None
) -> ChatBackend:
    """The checks before a start, then the known-answer engine (no prepare: `gpu_agenda.sh
    prepare` has built the kernels)."""
    launch.preflight_gate(plan, [plan.config], gpu=gpu, show=show)
    config = plan.config
    assert config.log_dir is not None  # the settings' logs folder
    return known_answer.engine(
        Path(config.model_path),
        config.log_dir,
        profile=config.profile,
        min_accept_length=config.min_accept_length,
    )


if __name__ == "__main__":
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1"
    launch.engine_backend = known_answer_engine
    sys.exit(main(sys.argv[1:]))
