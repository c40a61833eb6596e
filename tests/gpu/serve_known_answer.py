"""`ling-chat serve`'s code path on a known-answer model (GPU tests run this as a process).

python -m tests.gpu.serve_known_answer MODEL_DIR PORT [random]
"""

from __future__ import annotations

import os
import sys

from app.backend.engine.config import EngineConfig
from app.backend.remote.server import serve
from app.render.proof import format_report
from tests.gpu import known_answer, models


def main() -> int:
    model, port = sys.argv[1], int(sys.argv[2])
    known = "random" not in sys.argv[3:]
    os.environ[known_answer.KNOWN_ANSWER_ENV] = "1" if known else "0"
    config = EngineConfig(
        model_path=model,
        mem_fraction=models.mem_fraction(),
        context_length=models.CONTEXT,
        overrides={"load_format": "dummy", "host": "127.0.0.1", "port": port},
    )
    ok = serve(
        config,
        format_report,
        scheduler_entry=known_answer.run_scheduler_process,
    )
    return 0 if ok else 2


if __name__ == "__main__":
    raise SystemExit(main())
