"""`ling-chat serve`: SGLang's own HTTP server running ling-chat's patched scheduler.

The model changes are the in-process engine's (same scheduler entry, same plan), the
evidence reaches clients in `/server_info` under `ling_chat_proof`, and once SGLang's
warm-up is done the server judges itself through its own HTTP API, exactly as a remote
client would, and shuts down if the proof fails.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable
from typing import TextIO

from app.backend.engine.config import (
    REASONING_PARSER,
    EngineConfig,
    chat_template_kwargs,
    draft_models,
    server_args,
)
from app.backend.engine.patches.boundary import PLAN_ENV, PatchPlan
from app.backend.engine.setup import (
    check_load_format,
    check_model_path,
    engine_missing,
    gpu_facts,
    set_engine_environment,
)
from app.backend.engine.sglang_log import log_path, route_sglang_logging
from app.backend.remote.remote import RemoteBackend
from app.backend.resident.keeper import InFlight, Keeper
from app.core.proof_report import ProofReport
from app.plumbing.redact import protect
from app.plumbing.to_log import output_to_log


def serve(
    config: EngineConfig,
    render: Callable[[ProofReport], str],
    *,
    scheduler_entry: Callable[..., None] | None = None,
    keeper: Keeper | None = None,
) -> bool:
    """Run the server until it stops; returns False when its proof refused it.

    Everything SGLang and uvicorn write goes to SGLang's log, the API key masked; the
    terminal gets only the proof report and the verdict.

    Args:
        config: what to serve (its overrides carry host, port, api_key, tp_size).
        render: the proof report as the terminal shows it, once the server judged itself.
        scheduler_entry: replaces ling-chat's scheduler entry (GPU tests only).
        keeper: for a resident engine: counts its requests, and is told once it proved
            itself (its idle timer starts then).
    """
    check_model_path(config.model_path, draft_models([config]))
    set_engine_environment()  # before SGLang's modules read it at import
    log_file = log_path(config)
    route_sglang_logging(log_file)
    protect(config.overrides.get("api_key"))
    os.environ[PLAN_ENV] = PatchPlan.for_profile(config.levers, str(log_file)).to_env()
    with output_to_log(log_file) as terminal:
        try:
            from sglang.srt.entrypoints.http_server import app as fastapi_app
            from sglang.srt.entrypoints.http_server import launch_server
            from sglang.srt.server_args import ServerArgs

            from app.backend.engine import patches
        except ImportError as exc:
            raise engine_missing(exc) from exc

        # Ling-3.0-flash thinks by default and SGLang's template detection cannot tell: name
        # its parser, so that clients get the thinking apart, as `reasoning_content`.
        serving = {
            REASONING_PARSER.name: REASONING_PARSER.value,
            "default_chat_template_kwargs": chat_template_kwargs(),
        }
        kwargs = server_args(config, gpu_facts())
        check_load_format(kwargs)
        args = ServerArgs(**{**serving, **kwargs})
        verdict: list[bool] = []

        def prove() -> ProofReport:
            return asyncio.run(self_proof(args.host, args.port, args.api_key, config))

        def judge_self() -> None:
            """Runs in SGLang's warm-up thread once the server is ready; unproven: stop."""
            verdict.append(judge(prove, render, terminal))
            if not verdict[-1]:
                os.kill(os.getpid(), signal.SIGTERM)
            elif keeper is not None:
                keeper.ready()

        print(f"ling-chat: starting SGLang's server; its log: {log_file}", file=terminal)
        if keeper is not None:
            fastapi_app.add_middleware(InFlight, keeper=keeper)
        launch_server(
            args,
            run_scheduler_process_func=scheduler_entry or patches.run_scheduler_process,
            run_detokenizer_process_func=patches.run_detokenizer_process,
            launch_callback=judge_self,
        )
    return bool(verdict) and all(verdict)


def judge(
    prove: Callable[[], ProofReport], render: Callable[[ProofReport], str], out: TextIO
) -> bool:
    """The server's verdict on itself, shown on `out`: False when the proof fails or could
    not be run. Only `out` is written: other threads' output stays where it goes."""
    try:
        report = prove()
    except Exception as exc:  # noqa: BLE001 - a server that cannot judge itself is unproven
        print(f"ling-chat: refused to serve: the proof could not run ({exc})", file=out, flush=True)
        return False
    print(render(report), file=out, flush=True)
    return report.ok


def local_url(host: str, port: int) -> str:
    """The URL this machine reaches a server bound to `host` at (IPv6 in brackets)."""
    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    return f"http://[{local}]:{port}" if ":" in local else f"http://{local}:{port}"


async def self_proof(
    host: str, port: int, api_key: str | None, config: EngineConfig
) -> ProofReport:
    """The proof as a client sees it: server info plus a measured warm-up reply."""
    client = RemoteBackend(
        local_url(host, port),
        api_key=api_key,
        min_accept_length=config.min_accept_length,
        allow_unoptimized=True,
        profile=config.profile,
    )
    try:
        async for _stage in client.start():
            pass
        return await client.proof()
    finally:
        await client.shutdown()
