"""What the in-process engine needs before it boots: the model's path, SGLang, the GPU."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from app.backend.download import is_hub_id
from app.backend.engine.config import LOAD_FORMAT_PACKAGES, GpuFacts, engine_environment
from app.core.errors import BackendError, ModelNotFound

ENGINE_PACKAGES = ("sglang", "torch", "humming")
"""The packages of the `engine` extra: missing one is an install problem, not a bug."""


def engine_missing(exc: ImportError) -> BackendError:
    """The one-line error for a missing engine package; a missing other module re-raises."""
    if (exc.name or "").split(".")[0] not in ENGINE_PACKAGES:
        raise exc
    return BackendError(
        f"the engine is not installed ({exc.name} missing): pip install 'ling-chat[engine]'"
    )


def check_load_format(server_kwargs: dict) -> None:
    """Fail before the boot when the load format's reader is not installed.

    Raises:
        BackendError: one line naming the format and the install that brings its package.
    """
    fmt = server_kwargs.get("load_format")
    module = LOAD_FORMAT_PACKAGES.get(fmt) if isinstance(fmt, str) else None
    if module is not None and importlib.util.find_spec(module) is None:
        raise BackendError(
            f"load format {fmt} needs the {module} package, which is not installed: "
            "pip install 'ling-chat[engine]' (or --sglang-arg load_format=auto)"
        )


def check_model_path(model_path: str, drafts: Iterable[str] = ()) -> None:
    """Fail fast on a local checkpoint or draft model that is missing or holds no config.json.

    Raises:
        ModelNotFound: one line naming the path.
    """
    _check_local("model path", model_path)
    for draft in drafts:
        _check_local("draft model path", draft)


def _check_local(what: str, model_path: str) -> None:
    if is_hub_id(model_path):
        return  # fetched into the Hugging Face cache at start-up (app/backend/download.py)
    path = Path(model_path).expanduser()
    if not path.is_dir():
        raise ModelNotFound(f"{what} {path} does not exist")
    if not (path / "config.json").is_file():
        raise ModelNotFound(f"{what} {path} has no config.json")


def set_engine_environment() -> None:
    """The engine's variables in this process, which SGLang's processes inherit; a
    variable the user has set keeps its value."""
    for name, value in engine_environment().items():
        os.environ.setdefault(name, value)


def gpu_facts() -> GpuFacts:
    """What this GPU and the installed kernels allow."""
    import torch

    try:
        major, minor = torch.cuda.get_device_capability()
    except (RuntimeError, AssertionError) as exc:  # no driver, no device, a CPU-only torch
        raise BackendError(f"no usable CUDA GPU: {exc}") from exc
    has_fa3 = False
    try:
        import sgl_kernel.flash_ops  # noqa: F401

        has_fa3 = True
    except ImportError:
        pass
    return GpuFacts(
        sm=major * 10 + minor,
        has_fa3=has_fa3,
        has_flashinfer=importlib.util.find_spec("flashinfer") is not None,
        has_xgrammar=importlib.util.find_spec("xgrammar") is not None,
    )


def engine_class(scheduler_entry: Callable[..., None] | None = None) -> type:
    """SGLang's Engine with ling-chat's scheduler and detokenizer entries."""
    from sglang.srt.entrypoints.engine import Engine

    from app.backend.engine import patches

    class LingEngine(Engine):
        run_scheduler_process_func = staticmethod(scheduler_entry or patches.run_scheduler_process)
        run_detokenizer_process_func = staticmethod(patches.run_detokenizer_process)

    return LingEngine


def sglang_version() -> str:
    """The installed SGLang's version."""
    import sglang

    return str(sglang.__version__)
