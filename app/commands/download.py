"""Download the model's checkpoint into the Hugging Face cache (resumable; offline: check it)."""

from __future__ import annotations

import argparse

from app.backend.engine.config import draft_models
from app.commands.common import add_data_arguments, settings_from
from app.launch import engine_config, fetch_model


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="?",
        help="HF id or local folder (default: the configured model_path, and with the dspark "
        "profile its dspark_draft)",
    )
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Fetch what the cache lacks; print each checkpoint's folder."""
    if args.model:
        models = [args.model]
    else:
        settings = settings_from(args)
        models = [settings.model_path, *draft_models([engine_config(settings)])]
    for model in models:
        print(fetch_model(model), flush=True)
    return 0
