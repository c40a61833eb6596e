"""Check the machine (the preflight), then compile every kernel the engine builds at run time
on a small dummy model and cache it, so that later starts only load weights."""

from __future__ import annotations

import argparse

from app import launch
from app.commands.common import add_data_arguments, add_model_arguments, launch_plan_from


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """The preflight, then the prepare unless its marker says it was done."""
    plan = launch_plan_from(args)
    launch.prepare_engines(plan, [plan.config])
    return 0
