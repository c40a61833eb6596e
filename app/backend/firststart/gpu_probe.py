"""Is there a usable NVIDIA GPU? Asked of the driver itself, without torch or SGLang.

The CUDA driver API (`libcuda`) answers in milliseconds: `cuInit` starts the driver and
`cuDeviceGetCount` counts the devices this process may use (`CUDA_VISIBLE_DEVICES`
applies). torch and SGLang use the same driver, so what it refuses they cannot run on.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.core.errors import PreflightFailed

LIBCUDA = "nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1"


@dataclass(frozen=True, slots=True)
class GpuProbe:
    """What the driver said: a GPU was found (the first one's name), or why not."""

    found: bool
    name: str = ""
    reason: str = ""


def probe_gpu(load: Callable[[str], Any] = ctypes.CDLL) -> GpuProbe:
    """Ask the CUDA driver for its first GPU; `load` opens the driver library."""
    try:
        cuda = load(LIBCUDA)
    except OSError:
        return GpuProbe(False, reason=f"no NVIDIA driver ({LIBCUDA} not found)")
    if (status := cuda.cuInit(0)) != 0:
        return GpuProbe(False, reason=f"the NVIDIA driver did not start ({_error(cuda, status)})")
    count = ctypes.c_int(0)
    if (status := cuda.cuDeviceGetCount(ctypes.byref(count))) != 0 or count.value < 1:
        why = _error(cuda, status) if status else "the driver sees none"
        return GpuProbe(False, reason=f"no CUDA device ({why}; CUDA_VISIBLE_DEVICES applies)")
    device = ctypes.c_int(0)
    name = ctypes.create_string_buffer(256)
    if cuda.cuDeviceGet(ctypes.byref(device), 0) != 0 or cuda.cuDeviceGetName(name, 256, device):
        return GpuProbe(True, name="CUDA device 0")
    return GpuProbe(True, name=name.value.decode(errors="replace"))


def require_gpu(probe: Callable[[], GpuProbe] | None = None) -> GpuProbe:
    """The probe of a found GPU.

    Raises:
        PreflightFailed: one line saying why there is none (exit status 3, as when the
            preflight's own GPU check refuses).
    """
    result = (probe or probe_gpu)()
    if not result.found:
        raise PreflightFailed(
            f"no usable NVIDIA GPU: {result.reason}; the engine needs one "
            "(no GPU here? try `ling-chat --replay demo` or `--server URL`)"
        )
    return result


def _error(cuda: Any, status: int) -> str:
    """The driver's name for an error code: CUDA_ERROR_NO_DEVICE (100)."""
    name = ctypes.c_char_p()
    if cuda.cuGetErrorName(status, ctypes.byref(name)) == 0 and name.value:
        return f"{name.value.decode(errors='replace')} ({status})"
    return f"CUDA error {status}"
