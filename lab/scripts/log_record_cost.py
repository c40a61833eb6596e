"""What SGLang's INFO logging costs a round on this CPU, through ling-chat's logging config.

A running scheduler logs at INFO one decode-stats line every `decode_log_interval` (40)
rounds; the line's text is built whatever the level. Times one record of that line's length
through ling-chat's config (file handler, secret-masking filter) at INFO (written) and at
WARNING (dropped), microseconds a record, and the cost a round at one line per 40 rounds.

    python lab/scripts/log_record_cost.py [--records 20000]
"""

from __future__ import annotations

import argparse
import json
import logging
import logging.config
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backend.engine.sglang_log import logging_config  # noqa: E402

LINE = (
    "Decode batch, #running-req: 1, #token: 2304, token usage: 0.01, accept len: 4.00, "
    "accept rate: 1.00, cuda graph: True, gen throughput (token/s): 965.77, #queue-req: 0"
)
INTERVAL = 40
"""SGLang 0.5.23's default `decode_log_interval`."""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args()
    logger = logging.getLogger("sglang.srt.managers.scheduler_components.metrics_reporter")
    with tempfile.TemporaryDirectory() as folder:
        logging.config.dictConfig(logging_config(Path(folder) / "sglang.log"))
        rows = {}
        for level in ("INFO", "WARNING"):
            logging.getLogger().setLevel(level)
            batches = []
            for _ in range(5):
                started = time.perf_counter()
                for _ in range(args.records // 5):
                    logger.info(LINE)
                batches.append((time.perf_counter() - started) / (args.records // 5) * 1e6)
            us = statistics.median(batches)
            rows[level] = {"us_per_record": round(us, 2), "us_per_round": round(us / INTERVAL, 3)}
            print(f"root at {level:7}: {us:6.2f} us a record, {us / INTERVAL:.3f} us a round")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
