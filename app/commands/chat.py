"""Open the chat app (the default command).

The model runs in-process on SGLang unless --server or --replay says otherwise; it only
starts once every decode optimization is proven engaged. --replay plays a recorded
session (no GPU needed); --record saves this session's stages, proof and replies.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import sys
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from app.api_key import add_api_key_arguments, api_key
from app.commands.common import add_data_arguments, add_model_arguments, settings_from
from app.core.errors import ConfigError
from app.core.exit_status import ExitStatus
from app.plumbing.abrupt_end import on_abrupt_end

if TYPE_CHECKING:
    from app.backend.protocol import ChatBackend
    from app.settings import Settings
    from app.ui import LingChatApp
    from app.ui.signal_stop import SignalStop

NO_TERMINAL = (
    "the chat reads its keys from a terminal, and standard input is not one "
    "(`ling-chat history` and `export` read the history without one)"
)
BUSY_TIMEOUT_S = 0.5
"""How long the chat waits for another process's write lock: the UI stands still meanwhile,
so a send, rename or delete on a locked history fails fast (a notice, the text is kept)."""
PROOF_HOLD_S = 5.0
"""How long a passing proof report stays up before the chat (Enter goes on at once)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The chat's own flags, plus the model and data flags."""
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--replay",
        metavar="TRACE",
        help="play a recorded session (no GPU); `demo` plays the one recorded on an H200",
    )
    source.add_argument("--server", metavar="URL", help="use a running SGLang server")
    parser.add_argument(
        "--replay-speed",
        type=float,
        default=1.0,
        metavar="X",
        help="play a replay X times faster (default: 1, as recorded)",
    )
    parser.add_argument("--record", metavar="TRACE", help="record this session to TRACE (JSON)")
    parser.add_argument(
        "--server-wait",
        dest="server_wait",
        type=float,
        default=argparse.SUPPRESS,
        metavar="S",
        help="with --server: give up on an answer, first token or next token after S seconds"
        " (default: 120)",
    )
    add_api_key_arguments(parser, "API key for --server")
    parser.add_argument(
        "--allow-unoptimized",
        action="store_true",
        help="with --server: chat even when the server's optimizations are not proven",
    )
    parser.add_argument(
        "--keep-engine",
        metavar="DURATION",
        default=argparse.SUPPRESS,
        help="keep the engine loaded DURATION (30m, 2h) after quitting, for the next start in "
        "seconds; it holds its GPU memory meanwhile (default 0: it stops with the chat)",
    )
    add_model_arguments(parser)
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the chat app; returns its exit status."""
    import asyncio

    from app.backend.replay import RecordingBackend
    from app.plumbing.logfile import logging_to
    from app.prefs import config_dir
    from app.settings import source_of

    if not (math.isfinite(args.replay_speed) and args.replay_speed > 0):
        raise ConfigError(f"--replay-speed must be a positive number, got {args.replay_speed}")
    if args.allow_unoptimized and not args.server:
        raise ConfigError("--allow-unoptimized only applies to --server")
    settings = settings_from(args)
    if settings.keymap:
        from app.ui.bindings import check_keymap

        check_keymap(settings.keymap, source_of(["keymap"]))
    backend = _backend(args, settings)  # refuses a missing GPU before Textual is imported
    if sys.stdin is None or not sys.stdin.isatty():  # `< /dev/null`, a pipe: no keys to read
        asyncio.run(backend.shutdown())
        raise ConfigError(NO_TERMINAL)
    from app.storage import ChatStore
    from app.ui import LingChatApp
    from app.ui.paste_input import guard_pastes
    from app.ui.signal_stop import SignalStop

    with (
        SignalStop() as stop,
        logging_to(settings.log_dir),
        _history(args, settings) as db_path,
        ChatStore.open(db_path, busy_timeout_s=BUSY_TIMEOUT_S) as store,
    ):
        store.check_writable()  # before the model starts, which can take minutes
        app = LingChatApp(
            backend,
            store,
            sampling=settings.sampling.to_sampling(),
            keymap=settings.keymap,
            allow_unoptimized=args.allow_unoptimized,
            log_dir=settings.log_dir,
            proof_hold_s=_proof_hold_s(backend),
            load_tip=KEEP_TIP
            if backend.info.kind == "engine" and not settings.keep_engine_s
            else None,
            prefs_dir=config_dir(),
            reply_notice=settings.reply_notice,
        )
        guard_pastes()
        asyncio.run(_run_app(app, stop))
    if app.crash_message:
        print(app.crash_message, file=sys.stderr)
    status = app.return_code or 0
    if isinstance(backend, RecordingBackend) and backend.save_error:
        print(f"ling-chat: the recording was not saved: {backend.save_error}", file=sys.stderr)
        status = app.return_code or ExitStatus.ERROR
    stop.exit_if_stopped(status)
    return status


@contextlib.contextmanager
def _history(args: argparse.Namespace, settings: Settings) -> Iterator[Path]:
    """The history database: the user's, or for a replay a throwaway one removed at exit.

    A replay is a demonstration: its replies are not the user's and their speeds were
    measured on another machine, so they stay out of the history and its statistics.
    """
    if not args.replay:
        yield settings.db_path
        return
    with tempfile.TemporaryDirectory(prefix="ling-chat-replay-") as folder:
        forget = on_abrupt_end(partial(shutil.rmtree, folder, ignore_errors=True))
        try:
            yield Path(folder) / "history.db"
        finally:
            forget()


KEEP_TIP = (
    'keep_engine = "30m" in the config (or --keep-engine 30m) keeps it loaded after you quit, '
    "so the next start takes seconds; meanwhile it holds its GPU memory (on a Spark, most of "
    "the unified memory) until unused that long. `ling-chat engine stop` frees it."
)
"""Shown after a long load of the in-process engine."""


async def _run_app(app: LingChatApp, stop: SignalStop) -> None:
    """Run the app, quit by the stop signals; the backend is shut down even when it crashed."""
    stop.attach(app)
    try:
        await app.run_async()
    finally:
        await app.close_backend()
        stop.detach()


def _proof_hold_s(backend: ChatBackend) -> float:
    """Seconds a passing proof stays up before the chat: none when the chat attaches to a
    resident engine that was loaded already (its proof was shown then), recorded or not."""
    from app.backend.remote.resident import ResidentBackend
    from app.backend.replay import RecordingBackend

    chosen = backend.inner if isinstance(backend, RecordingBackend) else backend
    return 0.0 if isinstance(chosen, ResidentBackend) and chosen.attached else PROOF_HOLD_S


def _backend(args: argparse.Namespace, settings: Settings) -> ChatBackend:
    """The backend the flags ask for, wrapped in a recorder with --record."""
    from app.backend.replay import RecordingBackend, ReplayBackend, trace_path

    backend: ChatBackend
    if args.replay:
        backend = ReplayBackend(trace_path(args.replay), speed=args.replay_speed)
    elif args.server:
        from app.backend.remote.remote import RemoteBackend
        from app.plumbing.redact import protect

        key = api_key(args)
        protect(key)  # out of any log and of the error log's tracebacks
        backend = RemoteBackend(
            args.server,
            api_key=key,
            min_accept_length=settings.min_accept_length,
            allow_unoptimized=args.allow_unoptimized,
            profile=settings.profile,
            server_wait=settings.server_wait,
        )
    else:
        from app import launch
        from app.commands.common import launch_plan_from

        plan = launch_plan_from(args)
        if settings.keep_engine_s > 0:
            backend = launch.resident_backend(plan)
        else:
            backend = launch.engine_backend(plan)
    if args.record:
        backend = RecordingBackend(backend, args.record)
    return backend
