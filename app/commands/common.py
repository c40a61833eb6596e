"""Arguments several commands share, and turning them into Settings."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from app.core.errors import ConfigError
from app.levers.draft.dspark import DRAFT as DSPARK_DRAFT
from app.levers.profiles import DEFAULT_PROFILE, PROFILES, USER_PROFILES

if TYPE_CHECKING:
    from app.launch import LaunchPlan
    from app.settings import Settings


def _profile(text: str) -> str:
    if text not in PROFILES:
        raise argparse.ArgumentTypeError(
            f"unknown profile {text!r}; choose from {', '.join(USER_PROFILES)}"
        )
    return text


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """--model, --profile, --dspark-draft, --mem-fraction, --skip-preflight: what the engine
    loads and how."""
    # SUPPRESS: a flag left out of a sub-command must not erase one given before it.
    parser.add_argument(
        "--model",
        dest="model_path",
        default=argparse.SUPPRESS,
        help="checkpoint directory or HF id",
    )
    parser.add_argument(
        "--profile",
        type=_profile,
        metavar="{" + ",".join(USER_PROFILES) + "}",
        default=argparse.SUPPRESS,
        help=f"{DEFAULT_PROFILE}: all three optimizations (default); dspark: DSpark's draft in"
        " place of NEXTN; baseline: the official recipe without them, to compare with",
    )
    parser.add_argument(
        "--dspark-draft",
        default=argparse.SUPPRESS,
        help=f"the dspark profile's draft model: folder or HF id (default: {DSPARK_DRAFT})",
    )
    parser.add_argument(
        "--mem-fraction",
        type=float,
        default=argparse.SUPPRESS,
        help="share of GPU memory for SGLang",
    )
    parser.add_argument(
        "--skip-preflight",
        action="store_true",
        default=argparse.SUPPRESS,
        help="start even when the preflight refuses (for experts: a Spark can wedge)",
    )
    add_sglang_arguments(parser)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-dir: where history.db and logs live."""
    parser.add_argument(
        "--data-dir", default=argparse.SUPPRESS, help="directory for history.db and logs"
    )


def add_raw_argument(parser: argparse.ArgumentParser) -> None:
    """--raw: print stored text exactly, control characters and all (`app.textsafe`)."""
    parser.add_argument(
        "--raw",
        action="store_true",
        default=argparse.SUPPRESS,
        help="print stored text byte for byte: its terminal escapes act on a terminal",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings with the CLI flags that were given on top of env and config file."""
    from app.settings import load_settings

    names = (
        "model_path",
        "profile",
        "dspark_draft",
        "mem_fraction",
        "data_dir",
        "server_wait",
        "keep_engine",
    )
    return load_settings(**{name: getattr(args, name, None) for name in names})


def add_sglang_arguments(parser: argparse.ArgumentParser) -> None:
    """--sglang-arg KEY=VALUE: extra SGLang server arguments (JSON values or strings)."""
    parser.add_argument(
        "--sglang-arg",
        action="append",
        default=argparse.SUPPRESS,
        metavar="KEY=VALUE",
        help="pass an SGLang server argument through, e.g. load_format=dummy (repeatable)",
    )


def sglang_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The --sglang-arg KEY=VALUE pairs, wherever given; VALUE is JSON when it parses."""
    overrides: dict[str, Any] = {}
    for pair in getattr(args, "sglang_arg", []):
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--sglang-arg {pair!r}: expected KEY=VALUE")
        try:
            overrides[key.replace("-", "_")] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key.replace("-", "_")] = value
    return overrides


def launch_plan_from(
    args: argparse.Namespace, overrides: dict[str, Any] | None = None
) -> LaunchPlan:
    """The launch the flags ask for: settings, --sglang-arg (or serve's `overrides`, which
    hold them), --skip-preflight and bench's --allow-unproven."""
    from app.launch import launch_plan

    return launch_plan(
        settings_from(args),
        sglang_overrides(args) if overrides is None else overrides,
        skip_preflight=getattr(args, "skip_preflight", False),
        allow_unproven=getattr(args, "allow_unproven", False),
    )
