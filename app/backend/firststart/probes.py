"""Read the machine for the preflight: compilers, driver, GPU, memory, processes, disk, and a
local checkpoint's safetensors headers.

Each reader returns what it found or None; the judging is `app.backend.firststart.preflight`'s.
Parsers are separate pure functions so that each format is tested on CPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from app.backend.checkpoint.verify import check_checkpoint
from app.backend.firststart.preflight import (
    KNOWN_DRAFT_BYTES,
    KNOWN_WEIGHTS_BYTES,
    MODPROBE_OVERRIDE,
    GpuFloor,
    GpuInfo,
    Plan,
    Probes,
)
from app.backend.resident.process import alive
from app.backend.resident.state import read_state, runtime_path
from app.levers.lever import Package

SMI_QUERY = [
    "nvidia-smi",
    "--query-gpu=name,memory.total,compute_cap,driver_version",
    "--format=csv,noheader",
]
RESIDENT_NAMES = ("sglang::",)
"""Process names of an SGLang engine's processes (a ling-chat holding an engine has them as
children; another ling-chat command, a remote chat or an editor holds no GPU memory)."""
RESIDENT_ARGS = ("sglang.launch_server",)


def probe(
    download_dir: Path, packages: Sequence[str] = (), checkpoint: Path | None = None
) -> Probes:
    """Everything the preflight judges, read from this machine (`packages`: the lever
    modules to import; `checkpoint`: the local folder whose headers to check, if any)."""
    nvcc = find_nvcc()
    meminfo = _read(Path("/proc/meminfo")) or ""
    smi = parse_smi(next(iter(_run(SMI_QUERY).splitlines()), ""))
    return Probes(
        nvcc=nvcc,
        cuda_version=parse_nvcc_release(_run([nvcc, "--version"])) if nvcc else None,
        cxx=shutil.which(os.environ.get("CXX") or "c++"),
        driver=parse_driver(_read(Path("/proc/driver/nvidia/version")) or "")
        or (smi.driver if smi else None),
        gpu=_gpu(smi),
        mem_total=parse_meminfo(meminfo, "MemTotal"),
        mem_available=parse_meminfo(meminfo, "MemAvailable"),
        modprobe_override=Path(MODPROBE_OVERRIDE).exists(),
        resident=resident_processes(Path("/proc"), exclude=_ancestry()),
        own_resident=own_resident(),
        disk_free=shutil.disk_usage(_existing(download_dir)).free,
        import_errors=import_errors(packages),
        checkpoint=check_checkpoint(checkpoint) if checkpoint is not None else None,
    )


def import_errors(modules: Sequence[str]) -> dict[str, str]:
    """Each module that cannot be imported here, with the error (an import, not a lookup:
    a package found but broken fails as it would in SGLang's scheduler)."""
    errors = {}
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any failure is the line's evidence
            errors[module] = f"{type(exc).__name__}: {exc}"
    return errors


def find_nvcc() -> str | None:
    """nvcc where SGLang's and FlashInfer's JIT look: CUDA_HOME/CUDA_PATH, PATH, /usr/local/cuda."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        candidate = Path(home) / "bin" / "nvcc"
        return str(candidate) if os.access(candidate, os.X_OK) else None
    on_path = shutil.which("nvcc")
    if on_path:
        return on_path
    fallback = Path("/usr/local/cuda/bin/nvcc")
    return str(fallback) if os.access(fallback, os.X_OK) else None


def parse_nvcc_release(text: str) -> tuple[int, int] | None:
    """`Cuda compilation tools, release 13.0, V13.0.88` -> (13, 0)."""
    match = re.search(r"release (\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_driver(text: str) -> tuple[int, ...] | None:
    """The version in /proc/driver/nvidia/version (`... Kernel Module  580.95.05  ...`)."""
    match = re.search(r"Kernel Module(?: for \w+)?\s+(\d+(?:\.\d+)+)", text)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


@dataclass(frozen=True, slots=True)
class SmiRow:
    """One GPU as nvidia-smi lists it."""

    name: str
    total_bytes: int | None
    """None where nvidia-smi cannot say (`[N/A]` on unified memory)."""
    sm: int
    driver: tuple[int, ...]


def parse_smi(line: str) -> SmiRow | None:
    """`NVIDIA GB10, [N/A], 12.1, 580.95.05` (SMI_QUERY's columns) as a row."""
    parts = [part.strip() for part in line.split(",")]
    if len(parts) != 4 or not re.fullmatch(r"\d+\.\d+", parts[2]):
        return None
    major, minor = parts[2].split(".")
    mib = re.match(r"(\d+)\s*MiB", parts[1])
    driver = tuple(int(n) for n in re.findall(r"\d+", parts[3]))
    total = int(mib.group(1)) * 1024**2 if mib else None
    return SmiRow(parts[0], total, int(major) * 10 + int(minor), driver)


def parse_meminfo(text: str, field: str) -> int:
    """A /proc/meminfo field in bytes (0 when absent)."""
    match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0


def _gpu(smi: SmiRow | None) -> GpuInfo | None:
    """GPU 0; a total nvidia-smi cannot give (unified memory) from the CUDA driver."""
    if smi is None:
        return None
    total = smi.total_bytes if smi.total_bytes is not None else _cuda_total_bytes()
    return GpuInfo(name=smi.name, sm=smi.sm, total_bytes=total or 0)


def resident_processes(proc: Path, exclude: set[int]) -> tuple[str, ...]:
    """`pid N: cmdline` of each SGLang engine process under `proc`."""
    found = []
    for entry in sorted(proc.glob("[0-9]*"), key=lambda p: int(p.name)):
        pid = int(entry.name)
        raw = _read(entry / "cmdline") or ""
        argv = [arg for arg in raw.split("\0") if arg]
        comm = (_read(entry / "comm") or "").strip()
        names = {comm, *(os.path.basename(arg) for arg in argv[:2])}
        if pid in exclude or not argv:
            continue
        if any(n.startswith(RESIDENT_NAMES) for n in names) or any(
            arg in RESIDENT_ARGS for arg in argv
        ):
            found.append(f"pid {pid}: {' '.join(argv)[:120]}")
    return tuple(found)


def own_resident() -> str:
    """ling-chat's resident engine, if its state file names a running one: `pid N, ...`."""
    state = read_state(runtime_path())
    if state is None or not alive(state.pid):
        return ""
    return f"pid {state.pid}, {state.model_path}, profile {state.profile}"


def build_plan(
    checkpoint: str,
    mem_fraction: float,
    hub_cache: Path,
    drafts: Sequence[str] = (),
    packages: Sequence[Package] = (),
    gpu_floors: Sequence[GpuFloor] = (),
) -> Plan:
    """Weights and missing bytes of a local directory or a Hugging Face id's cache, plus the
    missing bytes of the draft models (`packages`: the lever modules the start needs,
    `gpu_floors`: the oldest GPU of each lever)."""
    local = Path(checkpoint).expanduser()
    if local.is_dir():
        size = sum(f.stat().st_size for f in local.glob("*.safetensors"))
        weights, missing = size or KNOWN_WEIGHTS_BYTES, 0
    else:
        weights, missing = KNOWN_WEIGHTS_BYTES, _missing(checkpoint, KNOWN_WEIGHTS_BYTES, hub_cache)
    missing += sum(_missing(draft, KNOWN_DRAFT_BYTES, hub_cache) for draft in drafts)
    return Plan(mem_fraction, weights, missing, tuple(packages), tuple(gpu_floors))


def _missing(model: str, known_bytes: int, hub_cache: Path) -> int:
    """What the cache lacks of a Hugging Face id's `known_bytes`; 0 for a local directory."""
    if Path(model).expanduser().is_dir():
        return 0
    from app.backend.download import blob_dir

    blobs = blob_dir(hub_cache, model)
    have = sum(f.stat().st_size for f in blobs.glob("*") if not f.name.endswith(".incomplete"))
    return max(0, known_bytes - have)


def hub_cache_dir() -> Path:
    """Where huggingface_hub keeps downloads: the downloader's own place, by its rules."""
    from app.backend.download import HubPlace

    return HubPlace.from_env().cache_dir


def _cuda_total_bytes() -> int | None:
    """cuDeviceTotalMem of device 0 through the driver library (no torch, no context)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        device, total = ctypes.c_int(), ctypes.c_size_t()
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), 0):
            return None
        if cuda.cuDeviceTotalMem_v2(ctypes.byref(total), device):
            return None
        return int(total.value)
    except (OSError, AttributeError):
        return None


def _ancestry() -> set[int]:
    """This process and its parents: a ling-chat wrapper is not another ling-chat."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        stat = _read(Path(f"/proc/{pid}/stat")) or ""
        pid = int(stat.rsplit(")", 1)[-1].split()[1]) if ")" in stat else 0
    return pids


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _read(path: Path) -> str | None:
    with contextlib.suppress(OSError):
        return path.read_text(errors="replace")
    return None


def _run(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""
