"""Project the 66 GB weight load on a DGX Spark from the H200's load benchmark (a projection,
not a measurement): every format that passed, the fastest cold one named. The GPU stages
(processing, repack, FP8 head) are projected at two bounds unless --gpu-slowdown says: as
fast as on the H200 (bound by the CPU or kernel launches) and 17.6x slower (bound by memory
bandwidth).

    python lab/scripts/spark_load_projection.py load-bench.json [--disk-gbps 5] \\
        [--cpu-factor 1] [--gpu-slowdown X ...] [--out lab/results/spark-load-projection.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lab.research.load_bench import LoadBench, fastest_passed  # noqa: E402
from lab.research.load_projection import (  # noqa: E402
    SparkAssumptions,
    project,
    projection_table,
)


def main() -> int:
    defaults = SparkAssumptions()
    parser = argparse.ArgumentParser()
    parser.add_argument("bench", type=Path, help="gpu_load_bench.py's JSON")
    parser.add_argument("--disk-gbps", type=float, default=defaults.disk_gbps)
    parser.add_argument("--cpu-factor", type=float, default=defaults.cpu_factor)
    parser.add_argument(
        "--gpu-slowdown",
        type=float,
        action="append",
        help=f"default: both bounds, 1 and {defaults.gpu_slowdown:.1f} (bandwidth-bound)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    try:
        bench = LoadBench.from_dict(json.loads(args.bench.read_text(encoding="utf-8")))
    except (OSError, ValueError) as err:
        print(f"spark_load_projection: {args.bench}: {err}", file=sys.stderr)
        return 2
    formats = list(
        dict.fromkeys((row.format, row.draft_reads_all) for row in bench.rows if row.passed)
    )
    if not formats:
        print(f"spark_load_projection: {args.bench}: no format passed", file=sys.stderr)
        return 2
    loads = []
    for slowdown in args.gpu_slowdown or [1.0, defaults.gpu_slowdown]:
        spark = SparkAssumptions(args.disk_gbps, args.cpu_factor, slowdown)
        bound = [project(bench, fmt, spark, draft_reads_all=all_) for fmt, all_ in formats]
        print(projection_table(bound))
        loads += bound
    chosen = fastest_passed(bench.rows, cold=True)
    if chosen is not None:
        print(f"chosen: {chosen[0]}, the fastest cold load that passed on the H200 (median)")
    if args.out:
        record = {
            "chosen": chosen[0] if chosen else None,
            "projections": [load.to_dict() for load in loads],
        }
        args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
