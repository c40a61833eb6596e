"""`ling-chat bench` run from its arguments, as the CLI parses them."""

from __future__ import annotations

import argparse

from app.commands import bench


def bench_main(argv: list[str]) -> int:
    """Parse `argv` as `ling-chat bench` does and run it; the exit code."""
    parser = argparse.ArgumentParser(prog="ling-chat bench")
    bench.add_arguments(parser)
    return bench.run(parser.parse_args(argv))
