"""Open the chat app (the default command).

The model runs in-process on SGLang unless --server or --replay says otherwise; it only
starts once every decode optimization is proven engaged. --replay plays a recorded
session (no GPU needed); --record saves this session's stages, proof and replies.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING

from app.backend.protocol import ChatBackend
from app.commands.common import add_data_arguments, add_model_arguments, settings_from
from app.errors import ConfigError
from app.settings import Settings

if TYPE_CHECKING:
    from app.ui import LingChatApp

BUSY_TIMEOUT_S = 0.5
"""How long the chat waits for another process's write lock: the UI stands still meanwhile,
so a send, rename or delete on a locked history fails fast (a notice, the text is kept)."""


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
    parser.add_argument("--api-key", metavar="KEY", help="API key for --server")
    parser.add_argument(
        "--allow-unoptimized",
        action="store_true",
        help="with --server: chat even when the server's optimizations are not proven",
    )
    add_model_arguments(parser)
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """Run the chat app; returns its exit status."""
    from app.backend.replay import RecordingBackend
    from app.logfile import logging_to
    from app.storage import ChatStore
    from app.ui import LingChatApp

    if args.replay_speed <= 0:
        raise ConfigError(f"--replay-speed must be positive, got {args.replay_speed}")
    if args.allow_unoptimized and not args.server:
        raise ConfigError("--allow-unoptimized only applies to --server")
    settings = settings_from(args)
    backend = _backend(args, settings)
    with (
        logging_to(settings.log_dir),
        ChatStore.open(settings.db_path, busy_timeout_s=BUSY_TIMEOUT_S) as store,
    ):
        store.check_writable()  # before the model starts, which can take minutes
        app = LingChatApp(
            backend,
            store,
            sampling=settings.sampling.to_sampling(),
            keymap=settings.keymap,
            allow_unoptimized=args.allow_unoptimized,
        )
        asyncio.run(_run_app(app))
    if isinstance(backend, RecordingBackend) and backend.save_error:
        print(f"ling-chat: the recording was not saved: {backend.save_error}", file=sys.stderr)
        return app.return_code or 1
    return app.return_code or 0


async def _run_app(app: LingChatApp) -> None:
    """Run the app; the backend is shut down even when the app crashed."""
    try:
        await app.run_async()
    finally:
        await app.close_backend()


def _backend(args: argparse.Namespace, settings: Settings) -> ChatBackend:
    """The backend the flags ask for, wrapped in a recorder with --record."""
    from app.backend.replay import RecordingBackend, ReplayBackend, trace_path

    backend: ChatBackend
    if args.replay:
        backend = ReplayBackend(trace_path(args.replay), speed=args.replay_speed)
    elif args.server:
        from app.backend.remote import RemoteBackend

        backend = RemoteBackend(
            args.server,
            api_key=args.api_key,
            min_accept_length=settings.min_accept_length,
            allow_unoptimized=args.allow_unoptimized,
            profile=settings.profile.value,
        )
    else:
        from app.commands.prepare import engine_backend

        backend = engine_backend(settings, args)
    if args.record:
        backend = RecordingBackend(backend, args.record)
    return backend
