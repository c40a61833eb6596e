"""Serve the patched engine over HTTP (SGLang's server, ling-chat's proof) for remote chat."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app import launch
from app.api_key import add_api_key_arguments, api_key
from app.backend.engine.config import draft_models
from app.backend.remote.remote import is_loopback
from app.commands.common import (
    add_data_arguments,
    add_model_arguments,
    launch_plan_from,
    sglang_overrides,
)
from app.core.duration import parse_duration
from app.core.errors import ConfigError
from app.render.proof import format_report

if TYPE_CHECKING:
    from app.backend.resident.keeper import Keeper


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_data_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--port", type=int, default=30000)
    add_api_key_arguments(parser, "required when binding to a non-loopback address")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size (GPUs)")
    parser.add_argument(
        "--resident",
        metavar="IDLE",
        help="run as the chat's resident engine (keep_engine starts it so): batch 1, "
        "loopback only, a state file for the chat to find it, stopped after IDLE unused",
    )


def run(args: argparse.Namespace) -> int:
    plan = launch_plan_from(args, serve_overrides(args))
    config = plan.config
    # A resident engine says it is loading from the start: a second chat waits for it.
    keeper = resident_keeper(args, plan) if args.resident else None
    if keeper is not None:
        keeper.loading()
    try:
        launch.prepare_engines(plan, [config], gpu=True)  # the preflight first: its disk check
        for model in [plan.settings.model_path, *draft_models([config])]:
            launch.fetch_model(model)
        from app.backend.remote.server import serve

        ok = serve(config, format_report, keeper=keeper)
    finally:
        if keeper is not None:
            keeper.close()
    return 0 if ok else 2


def resident_keeper(args: argparse.Namespace, plan: launch.LaunchPlan) -> Keeper:
    """The resident engine's state file and idle timer (SIGTERM stops it as Ctrl+C would)."""
    import os
    import signal
    import time

    from app import __version__
    from app.backend.remote.server import local_url
    from app.backend.resident.keeper import Keeper
    from app.backend.resident.state import (
        ResidentState,
        engine_settings,
        runtime_dir,
        settings_hash,
    )

    settings, config = plan.settings, plan.config
    mine = engine_settings(config)
    state = ResidentState(
        pid=os.getpid(),
        url=local_url(args.host, args.port),
        key_file=str(args.api_key_file),
        model_path=settings.model_path,
        profile=settings.profile,
        settings_hash=settings_hash(mine),
        settings=mine,
        idle_s=parse_duration(args.resident),
        log_file=str(settings.log_dir / launch.RESIDENT_LOG),
        version=__version__,
        started_at=time.time(),
    )
    return Keeper(runtime_dir(), state, lambda: os.kill(os.getpid(), signal.SIGTERM))


def resident_checks(args: argparse.Namespace, key: str | None) -> None:
    """A resident engine listens on loopback, with a key from a file."""
    try:
        if parse_duration(args.resident) <= 0:
            raise ValueError(f"{args.resident!r} is no time at all")
    except ValueError as exc:
        raise ConfigError(f"--resident: {exc}") from None
    if args.host != "127.0.0.1" or not key or args.api_key_file is None:
        raise ConfigError("--resident needs --host 127.0.0.1 and an --api-key-file")


def serve_overrides(args: argparse.Namespace) -> dict[str, object]:
    """SGLang server arguments for serving; refuses an open bind without an API key."""
    key = api_key(args)
    if not is_loopback(args.host) and not key:
        raise ConfigError(
            f"serving on {args.host} needs an API key: LING_CHAT_API_KEY, --api-key-file "
            "or --api-key (or bind to 127.0.0.1)"
        )
    if args.tp < 1:
        raise ConfigError(f"--tp {args.tp}: must be at least 1")
    if args.resident is not None:
        resident_checks(args, key)
        # One chat at a time: the in-process engine's batch-1 settings, measured the same.
        return {**sglang_overrides(args), "host": args.host, "port": args.port, "api_key": key}
    return {
        # Serving may batch several clients; batch 1 is the in-process chat's setting.
        "max_running_requests": None,
        "cuda_graph_bs_decode": None,
        **sglang_overrides(args),
        # Last: --sglang-arg cannot open the bind around the API-key rule above.
        "host": args.host,
        "port": args.port,
        "api_key": key,
        "tp_size": args.tp,
    }
