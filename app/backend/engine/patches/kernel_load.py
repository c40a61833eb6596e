"""A cached Humming kernel that CUDA refuses to load names its file and the cache to clear.

humming-kernels 0.1.12 reuses any existing `kernel.cubin` and asserts on cuModuleLoad's
result, so a damaged cubin fails every start with `AssertionError: <CUresult.
CUDA_ERROR_INVALID_IMAGE: 200>`, naming neither. The start's cache check
(app/backend/engine/kernel_cache.py) removes the damage it can see; this names what it could not.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan, refusal

INVALID_IMAGE = "CUDA_ERROR_INVALID_IMAGE"


def humming_cache_dir() -> str:
    """Where Humming keeps its kernels (its own rule: HUMMING_CACHE_DIR, else ~/.humming/cache)."""
    return os.environ.get("HUMMING_CACHE_DIR") or os.path.expanduser("~/.humming/cache")


def invalid_kernel(path: str, cache: str) -> str:
    """The refusal's message for a cubin CUDA cannot load."""
    return (
        f"CUDA cannot load the cached Humming kernel {path} ({INVALID_IMAGE}): delete "
        f"{os.path.dirname(path)}, or clear {cache}; the next start rebuilds it"
    )


def guarded(load: Callable[[Any], Any], cache: Callable[[], str]) -> Callable[[Any], Any]:
    """Humming's `load_cubin`, refusing with the file and cache on an invalid image."""

    def load_cubin(self: Any) -> Any:
        try:
            return load(self)
        except AssertionError as exc:
            if INVALID_IMAGE not in str(exc):
                raise
            raise refusal("humming", invalid_kernel(str(self.kernel_filename), cache())) from exc

    load_cubin.__wrapped__ = load  # type: ignore[attr-defined]
    return load_cubin


def install(plan: PatchPlan) -> None:
    """Guard every Humming kernel's cubin load in this (scheduler) process (the Humming
    lever's patch)."""
    from humming.jit.runtime import KernelRuntime

    KernelRuntime.load_cubin = guarded(KernelRuntime.load_cubin, humming_cache_dir)
