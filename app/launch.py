"""One place that turns settings and flags into a backend or a prepared engine.

The engine's config is built once (`LaunchPlan.config`), and each check before a start runs
once, in this order: overrides that contradict a lever, the model path, the engine's
packages, the GPU (`gpu=True`; the doctor reports a missing GPU in its preflight), then the
preflight's probes. Commands parse their flags into a `LaunchPlan` and call one function.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from app.backend.download import fetch_checkpoint, is_hub_id
from app.backend.engine.config import EngineConfig, draft_models
from app.backend.engine.setup import ENGINE_PACKAGES, check_model_path, engine_missing
from app.backend.firststart import probes as preflight_probes
from app.backend.firststart.first_start import PreparedBackend
from app.backend.firststart.gpu_probe import require_gpu
from app.backend.firststart.preflight import GpuFloor, Probes, is_unified, run_preflight
from app.backend.firststart.prepare import (
    PREPARE_MEM_FRACTION,
    PrepareSpec,
    build_env,
    build_jobs,
    heal_kernel_caches,
    prepare,
)
from app.backend.protocol import ChatBackend
from app.core.errors import BackendError, ConfigError, LeverOverridden, PreflightFailed
from app.levers.profiles import packages_of
from app.levers.refusals import refusal
from app.render.progress import TextBar
from app.settings import Settings

NO_KERNEL_KEYS = ("host", "port", "api_key", "load_format")
"""Server arguments that change no kernel (the prepare loads dummy weights anyway): left out
of the prepare and of its marker, so that `--sglang-arg load_format=dummy` reuses it."""
NON_WEIGHT_FILES = ["*.json", "*.jinja", "*.model", "*.txt", "*.tiktoken", "*.py"]


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """What a command asks to start: its settings, the engine's config built from them, and
    the flags that loosen the checks."""

    settings: Settings
    config: EngineConfig
    skip_preflight: bool = False
    """--skip-preflight: start despite failed preflight checks (a warning says so)."""
    allow_unproven: bool = False
    """bench --allow-unproven: measure engines whose levers an override contradicts."""


def launch_plan(
    settings: Settings,
    overrides: Mapping[str, Any] | None = None,
    *,
    skip_preflight: bool = False,
    allow_unproven: bool = False,
) -> LaunchPlan:
    """The plan for `settings` with these SGLang overrides (--sglang-arg, serve's own)."""
    config = engine_config(settings, dict(overrides or {}))
    return LaunchPlan(settings, config, skip_preflight, allow_unproven)


def engine_config(settings: Settings, overrides: dict[str, Any] | None = None) -> EngineConfig:
    """The engine's configuration from Settings (the backend never sees Settings)."""
    return EngineConfig(
        model_path=settings.model_path,
        profile=settings.profile,
        mem_fraction=settings.mem_fraction,
        log_dir=settings.log_dir,
        min_accept_length=settings.min_accept_length,
        dspark_draft=settings.dspark_draft,
        overrides=overrides or {},
    )


def check_engine_can_start(
    settings: Settings,
    configs: Sequence[EngineConfig],
    *,
    gpu: bool = True,
    unproven: bool = False,
) -> None:
    """The one-line refusals before SGLang is imported: overrides that contradict a lever
    (unless `unproven`), model path, engine packages, GPU (`gpu=False`: the caller reports a
    missing GPU itself, as the doctor's preflight does).

    Raises:
        LeverOverridden: an --sglang-arg or variable contradicts a profile's lever.
        BackendError: the model or the engine's packages are missing.
        PreflightFailed: no usable GPU.
    """
    for config in configs:
        overrides, env = config.overrides, os.environ
        if not unproven and (problem := refusal(config.levers, config.context, overrides, env)):
            raise LeverOverridden(problem)
    check_model_path(settings.model_path, draft_models(configs))
    for package in ENGINE_PACKAGES[:2]:  # the levers' packages are the preflight's
        if importlib.util.find_spec(package) is None:
            raise engine_missing(ImportError(name=package))
    if gpu:
        require_gpu()


def preflight_gate(
    plan: LaunchPlan,
    configs: Sequence[EngineConfig],
    *,
    gpu: bool = False,
    show: Callable[[str], None] | None = None,
) -> Probes:
    """The checks before a start (`check_engine_can_start`), then probe the machine and
    refuse a start that would fail or wedge it (`configs`: the engines the start boots, whose
    draft models' missing bytes the disk check counts).

    `show` receives every check's line (the doctor prints them all); failed lines always go
    to stderr. Returns the probes, which also size the prepare's compile jobs.

    Raises:
        LeverOverridden: an override contradicts a lever (before any probe).
        PreflightFailed: a check failed and --skip-preflight was not given.
    """
    settings = plan.settings
    check_engine_can_start(settings, configs, gpu=gpu, unproven=plan.allow_unproven)
    drafts = draft_models(configs)
    packages = tuple(dict.fromkeys(p for c in configs for p in packages_of(c.levers)))
    floors = tuple(dict.fromkeys(f for c in configs for f in GpuFloor.of(c.levers)))
    hub = preflight_probes.hub_cache_dir()
    local = Path(settings.model_path).expanduser()
    dummy = all(c.overrides.get("load_format") == "dummy" for c in configs)
    weights = local if local.is_dir() and not dummy else None  # headers only: under a second
    modules = [package.module for package in packages]
    probes = preflight_probes.probe(local if local.is_dir() else hub, modules, weights)
    machine = preflight_probes.build_plan(
        settings.model_path, settings.mem_fraction, hub, drafts, packages, floors
    )
    checks = run_preflight(probes, machine)
    for check in checks:
        if show is not None:
            show(check.line())
    failed = [check for check in checks if not check.ok]
    if not failed:
        return probes
    if plan.skip_preflight:
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


def engine_backend(
    plan: LaunchPlan, *, gpu: bool = True, show: Callable[[str], None] | None = None
) -> ChatBackend:
    """The in-process engine after the checks and the preflight, prepared first when its
    marker is missing (`gpu=False`: the doctor shows a missing GPU as a preflight line).

    Raises:
        LeverOverridden, BackendError: see `check_engine_can_start`.
        PreflightFailed: no usable GPU, or the preflight refused the start.
    """
    from app.backend.engine.engine import EngineBackend

    config = plan.config
    probes = preflight_gate(plan, [config], gpu=gpu, show=show)
    inner = EngineBackend(config)
    return PreparedBackend(inner, lambda: prepare_spec(config, probes), EngineBackend)


def prepare_engines(
    plan: LaunchPlan, configs: Sequence[EngineConfig], *, gpu: bool = False
) -> None:
    """The checks and the preflight, then each config's prepare in turn (serve: one; bench:
    one per profile).

    Raises:
        PreflightFailed: no usable GPU (`gpu=True`), or the preflight refused the start.
    """
    probes = preflight_gate(plan, configs, gpu=gpu)
    for config in configs:
        asyncio.run(prepare_printing(prepare_spec(config, probes)))


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


def fetch_model(model_path: str, stream: TextIO | None = None) -> str:
    """The local folder of `model_path`, downloaded first with a text progress bar if need be."""
    if not is_hub_id(model_path):
        return str(fetch_checkpoint(model_path))
    bar = TextBar(stream or sys.stderr)
    try:
        return str(fetch_checkpoint(model_path, bar))
    finally:
        bar.close()


RESIDENT_LOG = "resident.log"
"""The resident engine's terminal output (its proof report, the verdict), in the log folder."""


def resident_backend(plan: LaunchPlan, say: Callable[[str], None] | None = None) -> ChatBackend:
    """The chat on the resident engine for these settings (`keep_engine`): attached when one
    is loaded, else started detached after the checks and the preflight. A stale or hung
    engine is replaced with one line; one with other settings is never reused.

    Raises:
        ConfigError: an engine with other settings is resident, or another window uses it.
        LeverOverridden, BackendError, PreflightFailed: as `engine_backend`'s.
    """
    from app.backend.remote.resident import ResidentBackend
    from app.backend.resident import process
    from app.backend.resident.discover import Outcome, discover
    from app.backend.resident.lock import AttachLock
    from app.backend.resident.state import engine_settings, runtime_dir

    tell = say or (lambda line: print(f"ling-chat: {line}", file=sys.stderr, flush=True))
    settings, config = plan.settings, plan.config
    folder = runtime_dir()
    found = discover(folder, engine_settings(config))
    if found.outcome is Outcome.MISMATCH:
        raise ConfigError(found.detail)
    lock = AttachLock(folder)
    if not lock.acquire():
        raise ConfigError(
            f"the resident engine is in use by another ling-chat window (pid {lock.holder()}): "
            "one window at a time; quit that one, or chat there"
        )
    try:
        if found.detail:
            tell(found.detail)
        if found.outcome is Outcome.HUNG and found.state is not None:
            process.stop(found.state.pid)
        if found.state is not None and found.outcome in (Outcome.READY, Outcome.LOADING):
            pid = found.state.pid
        else:
            pid = start_resident(plan)
            tell(
                f"started the resident engine (pid {pid}): it stays loaded for "
                f"{settings.keep_engine} after the chat quits"
            )
    except BaseException:
        lock.release()
        raise
    return ResidentBackend(
        folder,
        pid,
        lock,
        log_file=settings.log_dir / RESIDENT_LOG,
        profile=settings.profile,
        min_accept_length=settings.min_accept_length,
        server_wait=settings.server_wait,
    )


def start_resident(plan: LaunchPlan) -> int:
    """`ling-chat serve --resident` detached, after this chat's checks and preflight (a
    refusal is one line here, not a line in a log); returns its pid."""
    from app.backend.resident.spawn import free_port, start_detached
    from app.backend.resident.state import new_key, runtime_dir

    settings, config = plan.settings, plan.config
    preflight_gate(plan, [config], gpu=True)
    argv = [
        "serve",
        "--model",
        settings.model_path,
        "--profile",
        settings.profile,
        "--dspark-draft",
        settings.dspark_draft,
        "--mem-fraction",
        repr(settings.mem_fraction),
        "--data-dir",
        str(settings.data_dir),
        "--port",
        str(free_port()),
        "--api-key-file",
        str(new_key(runtime_dir())),
        "--resident",
        settings.keep_engine,
        "--skip-preflight",  # this chat's preflight just passed
    ]
    for key, value in config.overrides.items():
        argv += ["--sglang-arg", f"{key}={json.dumps(value)}"]
    return start_detached(argv, settings.log_dir / RESIDENT_LOG)
