"""Serve the patched engine over HTTP (SGLang's server, ling-chat's proof) for remote chat."""

from __future__ import annotations

import argparse

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
from app.core.errors import ConfigError
from app.render.proof import format_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_data_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    parser.add_argument("--port", type=int, default=30000)
    add_api_key_arguments(parser, "required when binding to a non-loopback address")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size (GPUs)")


def run(args: argparse.Namespace) -> int:
    plan = launch_plan_from(args, serve_overrides(args))
    config = plan.config
    launch.prepare_engines(plan, [config], gpu=True)  # the preflight first: its disk check too
    for model in [plan.settings.model_path, *draft_models([config])]:
        launch.fetch_model(model)
    from app.backend.remote.server import serve

    ok = serve(config, format_report)
    return 0 if ok else 2


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
