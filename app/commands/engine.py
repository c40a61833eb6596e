"""The resident engine (`keep_engine`): `engine status` shows it, `engine stop` unloads it."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from app.commands.common import add_data_arguments

if TYPE_CHECKING:
    from app.backend.resident.state import ResidentState


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", choices=("status", "stop"), help="status: show it; stop: unload it"
    )
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from app.backend.resident import process
    from app.backend.resident.discover import Outcome, discover
    from app.backend.resident.state import read_state, remove_state, runtime_dir

    folder = runtime_dir()
    state = read_state(folder)
    if state is None or not process.alive(state.pid):
        if state is not None:
            remove_state(folder, state.pid)
            print(f"no resident engine (pid {state.pid} is gone; its state file removed)")
        else:
            print("no resident engine")
        return 0
    if args.action == "stop":
        killed = process.stop(state.pid)
        remove_state(folder, state.pid)
        how = "killed after it ignored SIGTERM" if killed else "stopped"
        print(f"resident engine (pid {state.pid}) {how}: its memory is free")
        return 0
    hung = discover(folder, dict(state.settings)).outcome is Outcome.HUNG
    print(status_text(state, hung, process.memory_held(state.pid), time.time()))
    return 1 if hung else 0


def status_text(state: ResidentState, hung: bool, memory: str, now: float) -> str:
    """The status lines of a resident engine."""
    from app.core.duration import format_duration

    if not state.ready:
        use = "loading"
    elif hung:
        use = "NOT ANSWERING (hung): `ling-chat engine stop` stops it"
    elif state.active:
        use = "in use (a reply in flight or a chat attached)"
    else:
        idle = format_duration(now - (state.active_at or now))
        use = f"idle for {idle}; stops after {format_duration(state.idle_s)} idle"
    return "\n".join(
        (
            f"resident engine: pid {state.pid}, ling-chat {state.version}",
            f"  model     {state.model_path}",
            f"  profile   {state.profile}",
            f"  memory    {memory}",
            f"  state     {use}",
            f"  listens   {state.url} (loopback; API key in {state.key_file}, mode 0600)",
            f"  up        {format_duration(now - state.started_at)}; log: {state.log_file}",
        )
    )
