"""Check the machine (the preflight), then compile every kernel the engine builds at run time
on a small dummy model and cache it, so that later starts only load weights."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app.backend.engine.config import EngineConfig, draft_models
from app.backend.firststart import probes as preflight_probes
from app.backend.firststart.first_start import PreparedBackend
from app.backend.firststart.preflight import Probes, is_unified, lever_packages, run_preflight
from app.backend.firststart.prepare import (
    PREPARE_MEM_FRACTION,
    PrepareSpec,
    build_env,
    build_jobs,
    heal_kernel_caches,
    prepare,
)
from app.backend.protocol import ChatBackend
from app.commands.common import (
    add_data_arguments,
    add_model_arguments,
    check_engine_can_start,
    engine_config,
    settings_from,
    sglang_overrides,
)
from app.core.errors import BackendError, PreflightFailed
from app.settings import Settings

NO_KERNEL_KEYS = ("host", "port", "api_key", "load_format")
"""Server arguments that change no kernel (the prepare loads dummy weights anyway): left out
of the prepare and of its marker, so that `--sglang-arg load_format=dummy` reuses it."""
NON_WEIGHT_FILES = ["*.json", "*.jinja", "*.model", "*.txt", "*.tiktoken", "*.py"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    add_data_arguments(parser)


def run(args: argparse.Namespace) -> int:
    """The preflight, then the prepare unless its marker says it was done."""
    settings = settings_from(args)
    prepare_engines(settings, args, [engine_config(settings, sglang_overrides(args))])
    return 0


def preflight_gate(
    settings: Settings,
    args: argparse.Namespace,
    configs: Sequence[EngineConfig],
    *,
    show: Callable[[str], None] | None = None,
) -> Probes:
    """Refuse overrides that contradict a lever, then probe the machine and refuse a start
    that would fail or wedge it (`configs`: the engines the start boots, whose draft models'
    missing bytes the disk check counts).

    `show` receives every check's line (the doctor prints them all); failed lines always go
    to stderr. Returns the probes, which also size the prepare's compile jobs.

    Raises:
        LeverOverridden: an override contradicts a lever (before any probe).
        PreflightFailed: a check failed and --skip-preflight was not given.
    """
    unproven = getattr(args, "allow_unproven", False)  # bench measures overridden levers
    check_engine_can_start(settings, configs, gpu=False, unproven=unproven)
    drafts = draft_models(configs)
    packages = tuple(dict.fromkeys(m for c in configs for m in lever_packages(c.levers)))
    hub = preflight_probes.hub_cache_dir()
    local = Path(settings.model_path).expanduser()
    probes = preflight_probes.probe(local if local.is_dir() else hub, packages)
    plan = preflight_probes.build_plan(
        settings.model_path, settings.mem_fraction, hub, drafts, packages
    )
    checks = run_preflight(probes, plan)
    for check in checks:
        if show is not None:
            show(check.line())
    failed = [check for check in checks if not check.ok]
    if not failed:
        return probes
    if getattr(args, "skip_preflight", False):
        print(
            f"ling-chat: warning: --skip-preflight: starting despite {len(failed)} failed "
            "check(s); on a unified-memory GPU this can wedge the machine",
            file=sys.stderr,
        )
        return probes
    if show is None:
        for check in failed:
            print(f"ling-chat: preflight: {check.line()}", file=sys.stderr)
    raise PreflightFailed(
        f"the preflight refused the start ({len(failed)} of {len(checks)} checks failed; "
        "--skip-preflight starts anyway, at your own risk)"
    )


def prepare_spec(config: EngineConfig, probes: Probes) -> PrepareSpec:
    """The prepare for `config` on this machine, its compile jobs sized to free memory."""
    gpu = probes.gpu
    pool = int(PREPARE_MEM_FRACTION * gpu.total_bytes) if gpu and is_unified(gpu) else 0
    jobs = build_jobs(probes.mem_available, os.cpu_count() or 1, pool)
    kept = {k: v for k, v in config.overrides.items() if k not in NO_KERNEL_KEYS}
    return PrepareSpec(
        config=dataclasses.replace(config, overrides=kept),
        checkpoint=checkpoint_dir(config.model_path),
        draft=None if config.draft_model is None else checkpoint_dir(config.draft_model),
        gpu=f"{gpu.name} sm_{gpu.sm}" if gpu else "no GPU",
        env=build_env(jobs),
    )


def checkpoint_dir(model_path: str) -> Path:
    """A local checkpoint as is; a hub id's config and tokenizer files from the HF cache.

    Raises:
        BackendError: huggingface_hub is missing or the files cannot be fetched.
    """
    local = Path(model_path).expanduser()
    if local.is_dir():
        return local
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise BackendError("huggingface_hub is missing: pip install 'ling-chat[engine]'") from exc
    try:
        return Path(snapshot_download(model_path, allow_patterns=NON_WEIGHT_FILES))
    except Exception as exc:  # noqa: BLE001 - offline, unknown repo, no access: one line
        raise BackendError(f"cannot fetch {model_path}'s config: {exc}") from exc


def engine_backend(
    settings: Settings, args: argparse.Namespace, *, show: Callable[[str], None] | None = None
) -> ChatBackend:
    """The in-process engine after the preflight, prepared first when its marker is missing.

    Raises:
        PreflightFailed: the preflight refused the start.
    """
    from app.backend.engine.engine import EngineBackend
    from app.commands.common import make_engine_backend

    config = engine_config(settings, sglang_overrides(args))
    probes = preflight_gate(settings, args, [config], show=show)
    inner = make_engine_backend(settings, args)
    return PreparedBackend(inner, lambda: prepare_spec(config, probes), EngineBackend)


async def prepare_printing(spec: PrepareSpec, out: Callable[[str], None] | None = None) -> None:
    """Run the prepare with the engine, one line per change of what it is doing."""
    from app.backend.engine.engine import EngineBackend

    say = out or (lambda line: print(line, file=sys.stderr, flush=True))
    for line in heal_kernel_caches():
        say(line)
    if spec.marker().is_file():
        say(f"kernels already prepared ({spec.marker()})")
        return
    last = ""
    async for stage in prepare(spec, EngineBackend):
        if stage.detail != last or stage.done:
            last = stage.detail
            say(f"[{stage.elapsed_s:6.1f}s] {stage.name}{' done' if stage.done else ''}  {last}")


def prepare_engines(
    settings: Settings, args: argparse.Namespace, configs: Sequence[EngineConfig]
) -> None:
    """The preflight, then each config's prepare in turn (serve: one; bench: one per profile).

    Raises:
        PreflightFailed: the preflight refused the start.
    """
    probes = preflight_gate(settings, args, configs)
    for config in configs:
        asyncio.run(prepare_printing(prepare_spec(config, probes)))
