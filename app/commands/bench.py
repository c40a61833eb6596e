"""Benchmark batch-1 decode, profile by profile (`bench compare A.json B.json` diffs two runs)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from app import __version__
from app.backend.engine.config import EngineConfig, draft_models
from app.backend.engine.setup import check_model_path, engine_missing, gpu_facts
from app.bench import host_table
from app.bench.bytemodel.bandwidth import roofline_columns
from app.bench.bytemodel.roofline import DGX_SPARK_GBPS
from app.bench.compare import compare_runs, render_comparison
from app.bench.host.measure import probe
from app.bench.inputs.gsm8k import load_gsm8k
from app.bench.inputs.suites import SUITES, nvidia_suite, recipes_suite
from app.bench.inputs.workloads import Workload, reasoning_workload, synthetic_workload
from app.bench.peer.recipe import PEER, PeerLaunch, check_peer_model
from app.bench.protocol import BenchEngine, EngineFactory
from app.bench.report import render_run, tables_json
from app.bench.results import BenchRun, ProfileResult
from app.bench.runner import BootPlan, run_bench
from app.bench.summary import published_json, render_published
from app.commands.common import add_model_arguments, settings_from, sglang_overrides
from app.core.errors import ConfigError
from app.files import write_atomic
from app.launch import fetch_model, launch_plan, prepare_engines
from app.levers.profiles import PROFILES

DEFAULT_PROFILES = ("baseline", "humming", "humming+fp8", "stack")
PEER_WAIT_S = 1200.0
"""The longest the stock server may take to become healthy (a Spark's cold start: 8 minutes)."""
APP_PACKAGE = Path(__file__).resolve().parents[1]
"""The `app` package's folder."""


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}")
        return value

    return parse


def _seconds(text: str) -> float:
    value = float(text)
    if not value > 0:  # NaN too
        raise argparse.ArgumentTypeError("must be more than 0 seconds")
    return value


def _boots(text: str) -> BootPlan:
    try:
        return BootPlan.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _profiles(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    if unknown := [name for name in names if name not in PROFILES]:
        raise argparse.ArgumentTypeError(
            f"unknown profile {', '.join(unknown)}; choose from {', '.join(PROFILES)}"
        )
    if len(set(names)) < len(names):
        raise argparse.ArgumentTypeError("a profile is named twice: use --boots to repeat one")
    return names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The benchmark's options, and the `compare` subcommand."""
    add_model_arguments(parser)
    parser.add_argument(
        "--profiles",
        type=_profiles,
        help=f"comma-separated profiles, run in this order (default: {','.join(DEFAULT_PROFILES)})",
    )
    parser.add_argument(
        "--suite",
        choices=SUITES,
        help="a published Spark protocol instead of --workload: nvidia (the synthetic 32K/2K rows"
        " and GSM8K's 1,319 questions, 5-shot, thinking on, with McNemar against baseline) or"
        " recipes (code, prose and random-8K prompts, 1,024 forced tokens); GSM8K comes from"
        " the Hugging Face Hub (cached after the first run)",
    )
    parser.add_argument(
        "--questions",
        type=_count(1),
        help="--suite nvidia: ask only the first N GSM8K test questions (default: all 1,319)",
    )
    parser.add_argument(
        "--workload",
        choices=["synthetic", "reasoning", "both"],
        help="what to send (default: both with --dataset, else synthetic)",
    )
    parser.add_argument(
        "--input-len",
        type=_count(1),
        default=32768,
        help="synthetic prompt tokens (default: 32768)",
    )
    parser.add_argument(
        "--output-len",
        type=_count(2),
        default=2048,
        help="synthetic reply tokens, and the cap on reasoning replies (default: 2048)",
    )
    parser.add_argument(
        "--dataset", type=Path, help="GSM8K-format JSONL for the reasoning workload"
    )
    parser.add_argument(
        "--num-prompts", type=_count(1), default=5, help="requests per repetition (default: 5)"
    )
    parser.add_argument("--reps", type=_count(1), default=2, help="repetitions (default: 2)")
    parser.add_argument(
        "--boots",
        type=_boots,
        default=BootPlan(),
        metavar="N[,ENGINE=K...]",
        help="boot each engine N times (ENGINE=K: that one K times), the most booted first, in"
        " rotation; each one's boots pooled, their spread shown (default: 1)",
    )
    parser.add_argument(
        "--host-time",
        action="store_true",
        help="after each boot: a verify round's wall time (3 short/long request pairs) and, on"
        " an engine's first boot, its GPU-busy time (SGLang's profiler): the host's share",
    )
    parser.add_argument(
        "--warmup", type=_count(0), default=1, help="unmeasured requests first (default: 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic token ids")
    parser.add_argument(
        "--peak-gbps",
        type=float,
        default=DGX_SPARK_GBPS,
        help=f"peak memory bandwidth for the roofline (default: {DGX_SPARK_GBPS:g}, DGX Spark)",
    )
    parser.add_argument(
        "--peer",
        choices=[PEER],
        help=f"also run stock SGLang's server ({PEER}: python -m sglang.launch_server, no"
        " ling-chat patches) with the official Spark recipe's flags on the same model and"
        " workloads, after the profiles: its row and its ratio to the default profile's; needs"
        " real weights (--model FOLDER of safetensors, no load_format=dummy)",
    )
    parser.add_argument(
        "--peer-wait",
        type=_seconds,
        default=PEER_WAIT_S,
        metavar="SECONDS",
        help=f"--peer: the longest its server may take to be healthy (default: {PEER_WAIT_S:g})",
    )
    parser.add_argument("--json", type=Path, help="write every number, per request too, here")
    parser.add_argument(
        "--allow-unproven",
        action="store_true",
        help="measure a profile whose proof fails (random weights collapse accept length)",
    )
    sub = parser.add_subparsers(dest="bench_command", metavar="{compare}")
    compare = sub.add_parser(
        "compare",
        help="per-profile changes from run A to run B; exit status 1 on a regression",
        description="Per-profile changes from run A to run B; exit status 1 on a regression.",
    )
    compare.add_argument("a", type=Path, metavar="A.json")
    compare.add_argument("b", type=Path, metavar="B.json")
    compare.add_argument(
        "--threshold",
        type=float,
        default=5.0,
        help="percent change for the worse that counts as a regression (default: 5)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the benchmark (or `compare`); 1 when anything failed or regressed."""
    if args.bench_command == "compare":
        return _compare(args)
    return _bench(args)


def _suite(args: argparse.Namespace) -> list[Workload]:
    if args.workload or args.dataset:
        raise ConfigError(f"--suite {args.suite} sets the workloads: drop --workload and --dataset")
    counts = {"num_prompts": args.num_prompts, "reps": args.reps, "warmup": args.warmup}
    if args.suite == "recipes":
        if args.questions is not None:
            raise ConfigError("--questions is for --suite nvidia")
        return recipes_suite(seed=args.seed, **counts)
    from app.bench.inputs.datasets import load_gsm8k_split  # huggingface_hub: only when needed

    test, train = load_gsm8k_split("test"), load_gsm8k_split("train")
    return nvidia_suite(test, train, questions=args.questions, seed=args.seed, **counts)


def _workloads(args: argparse.Namespace) -> list[Workload]:
    if args.suite:
        return _suite(args)
    if args.questions is not None:
        raise ConfigError("--questions is for --suite nvidia")
    choice = args.workload or ("both" if args.dataset else "synthetic")
    if choice != "synthetic" and args.dataset is None:
        raise ConfigError(f"--workload {choice} needs --dataset PATH (GSM8K-format JSONL)")
    counts = {"num_prompts": args.num_prompts, "reps": args.reps, "warmup": args.warmup}
    workloads = []
    if choice in ("synthetic", "both"):
        workloads.append(
            synthetic_workload(
                input_len=args.input_len, output_len=args.output_len, seed=args.seed, **counts
            )
        )
    if choice in ("reasoning", "both"):
        items = load_gsm8k(args.dataset)
        workloads.append(
            reasoning_workload(
                items, max_new_tokens=args.output_len, dataset=str(args.dataset), **counts
            )
        )
    return workloads


def _bench(args: argparse.Namespace) -> int:
    inherited = dict(os.environ)  # before any in-process engine sets SGLang's variables in it
    profile = getattr(args, "profile", None)
    if profile and args.profiles:
        raise ConfigError("give --profiles or --profile, not both")
    profiles = args.profiles or ([profile] if profile else list(DEFAULT_PROFILES))
    if args.json is not None and not args.json.parent.is_dir():
        raise ConfigError(f"--json {args.json}: no such directory")
    workloads = _workloads(args)
    settings = settings_from(args)
    check_model_path(settings.model_path)  # one line now, not one failure per profile
    overrides = sglang_overrides(args)
    if args.peer:
        check_peer_model(settings.model_path, overrides, inherited)
    if unknown := set(args.boots.counts) - {*profiles, *([args.peer] if args.peer else [])}:
        raise ConfigError(f"--boots names {', '.join(sorted(unknown))}, not run here")
    try:
        from app.bench.engine import bench_engine_factory
    except ModuleNotFoundError as exc:
        raise engine_missing(exc) from exc
    start = launch_plan(
        settings,
        overrides,
        skip_preflight=getattr(args, "skip_preflight", False),
        allow_unproven=args.allow_unproven,
    )
    config = start.config
    configs = [dataclasses.replace(config, profile=p) for p in profiles]
    prepare_engines(start, configs)
    for model in [settings.model_path, *draft_models(configs)]:
        folder = fetch_model(model)  # after the preflight, which checks the disk for them
        if args.peer and model == settings.model_path:
            check_peer_model(folder, overrides, inherited)  # a Hub id's files, now on disk
    factory = bench_engine_factory(config, require_proof=not args.allow_unproven)
    if args.peer:
        factory = _with_peer(factory, config, args.peer_wait, inherited, tuple(sorted(overrides)))
    plan = {
        "suite": args.suite,
        "profiles": profiles,
        "peer": args.peer,
        "workloads": [workload.describe() for workload in workloads],
        "peak_gbps": args.peak_gbps,
        "boots": args.boots.describe(),
        "host_time": args.host_time,
        "model_path": settings.model_path,
        "mem_fraction": settings.mem_fraction,
        "engine_overrides": overrides,
    }
    started = datetime.now(UTC).isoformat(timespec="seconds")
    git = source_state()

    def as_run(done: tuple[ProfileResult, ...]) -> BenchRun:
        return BenchRun(created_at=started, git=git, plan=plan, profiles=done)

    def save(done: tuple[ProfileResult, ...]) -> None:
        """After each profile: a run cut short by a time limit keeps what it measured."""
        write_json(as_run(done), args.json)

    results = asyncio.run(
        run_bench(
            factory,
            [*profiles, PEER] if args.peer else profiles,
            workloads,
            boots=args.boots,
            roofline=functools.partial(roofline_columns, peak_gbps=args.peak_gbps),
            host=probe(config.log_dir or Path.cwd(), args.input_len) if args.host_time else None,
            log=lambda line: print(line, file=sys.stderr, flush=True),
            on_profile=save if args.json is not None else None,
        )
    )
    run_result = as_run(results)
    print(render_run(run_result))
    if args.suite:
        print(f"\n\n{render_published(run_result)}")
    failed = any(p.error or any(w.summary.errors for w in p.workloads) for p in run_result.profiles)
    return 1 if failed else 0


def _with_peer(
    factory: EngineFactory,
    config: EngineConfig,
    wait_s: float,
    inherited: Mapping[str, str],
    unapplied: tuple[str, ...],
) -> EngineFactory:
    """`factory`, and the stock server for the peer's name: same model, memory and context;
    `inherited`: the variables this process started with; `unapplied`: the run's
    `--sglang-arg` names, which its label states it does not take."""
    from app.bench.peer.server import peer_factory

    launch = PeerLaunch(
        config.model_path, config.mem_fraction, config.context_length, gpu_facts(), unapplied
    )
    log_file = (config.log_dir or Path.cwd()) / f"{PEER}.log"
    peer = peer_factory(launch, log_file=log_file, wait_s=wait_s, inherited=inherited)

    async def start(name: str) -> BenchEngine:
        return await (peer if name == PEER else factory)(name)

    return start


def write_json(run: BenchRun, path: Path) -> None:
    """The run plus each workload's table rows, as indented JSON, written atomically.

    Raises:
        ExportError: the file cannot be written.
    """
    data = {**run.to_dict(), "tables": tables_json(run), "published": published_json(run)}
    data |= {"host_time": host_table.rows_json(run.profiles)}
    # default=str: a stray Path or enum in the engine's facts must not lose a long run.
    write_atomic(path, [json.dumps(data, indent=1, default=str) + "\n"], replace=True)


def read_json(path: Path) -> BenchRun:
    """A run written by `write_json`.

    Raises:
        ConfigError: the file is unreadable or not a ling-chat benchmark result.
    """
    try:
        return BenchRun.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a ling-chat bench result ({exc})") from exc


def source_state(package: Path = APP_PACKAGE) -> dict[str, Any]:
    """ling-chat's own version, and the commit of the git checkout that tracks its package.

    The commit (and dirty) is None when no checkout tracks `package` (an installed wheel),
    whichever repository the command runs in or the installation sits inside.
    """

    def git(*argv: str) -> str:
        return subprocess.run(
            ["git", "-C", str(package.parent), *argv],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()

    try:
        version = metadata.version("ling-chat")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = __version__
    try:
        git("ls-files", "--error-unmatch", f"{package.name}/__init__.py")
        return {
            "version": version,
            "commit": git("rev-parse", "HEAD"),
            "dirty": bool(git("status", "--porcelain")),
        }
    except (OSError, subprocess.SubprocessError):
        return {"version": version, "commit": None, "dirty": None}


def _compare(args: argparse.Namespace) -> int:
    comparison = compare_runs(read_json(args.a), read_json(args.b), threshold_pct=args.threshold)
    print(f"A: {args.a}\nB: {args.b}\n")
    print(render_comparison(comparison, threshold_pct=args.threshold))
    return 1 if comparison.worse else 0
