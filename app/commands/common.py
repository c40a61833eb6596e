"""Arguments several commands share, and turning them into Settings."""

from __future__ import annotations

import argparse

from app.settings import Profile, Settings, load_settings


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model, --profile, --mem-fraction: what the engine loads and how."""
    parser.add_argument("--model", dest="model_path", help="checkpoint directory or HF id")
    parser.add_argument(
        "--profile",
        choices=[p.value for p in Profile],
        help="optimizations to engage (default: stack; the others are for A/B runs)",
    )
    parser.add_argument("--mem-fraction", type=float, help="share of GPU memory for SGLang")


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-dir: where history.db and logs live."""
    parser.add_argument("--data-dir", help="directory for history.db and logs")


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings with the CLI flags that were given on top of env and config file."""
    names = ("model_path", "profile", "mem_fraction", "data_dir")
    return load_settings(**{name: getattr(args, name, None) for name in names})
