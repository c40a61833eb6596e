"""The preflight: can this machine start the engine without dying or wedging? (pure)

`run_preflight` judges an injected `Probes` record (what the machine has, read by
`app.backend.firststart.probes`) against a `Plan` (what the start will take). Each check is
one line; a failed one carries its fix. Nothing here touches the machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.backend.checkpoint.verify import CheckpointReport
from app.levers.lever import Package, Profile

GIB = 1024**3
MIN_CUDA = (12, 9)
"""The oldest nvcc that compiles SGLang 0.5.23's and FlashInfer 0.7.2's sm_121a kernels."""
MIN_DRIVER = 580
"""torch 2.14.1+cu130 ships the CUDA 13.0 runtime, and CUDA 13.x needs an r580 driver or newer
(NVIDIA's CUDA 13.0 release notes; DGX OS ships 580)."""
UNIFIED_SMS = frozenset({121})
"""GPUs whose memory is the machine's memory: the DGX Spark's GB10."""
CUDA_SHARE_OF_MEMTOTAL = 0.9
"""On unified memory CUDA's total is about MemTotal; below this share something caps it."""
COMPILE_MARGIN = 10 * GIB
"""One nvcc job (about 10 GB on the Spark) plus the host process, beyond SGLang's share."""
KERNEL_CACHE_BYTES = 2 * GIB
"""Disk the first start's kernel caches take (Humming, FlashInfer, Triton, SGLang JIT)."""
KNOWN_WEIGHTS_BYTES = 70 * 10**9
"""inclusionAI/Ling-3.0-flash-fp4's weights (66-70 GB): the upper end, to refuse, not wedge."""
KNOWN_DRAFT_BYTES = 3 * 10**9
"""inclusionAI/Ling-3.0-flash-dspark's weights (1.36B BF16 parameters, 2.7 GB), rounded up."""
MODPROBE_OVERRIDE = "/etc/modprobe.d/zz-nvidia-drm-override.conf"
"""Found on some Sparks; CUDA then reports about 62 of 121 GB."""


@dataclass(frozen=True, slots=True)
class GpuInfo:
    """The GPU as nvidia-smi (or the CUDA driver) reports it."""

    name: str
    sm: int
    """Compute capability as major*10+minor (121 for the GB10)."""
    total_bytes: int
    """The memory CUDA reports for the device."""


@dataclass(frozen=True, slots=True)
class Probes:
    """What the machine has, read once before anything loads."""

    nvcc: str | None
    """nvcc's path, found as SGLang and FlashInfer find it, or None."""
    cuda_version: tuple[int, int] | None
    """nvcc's release, e.g. (13, 0); None when nvcc is missing or did not say."""
    cxx: str | None
    """The host C++ compiler ($CXX, else c++) resolved to a path, or None."""
    driver: tuple[int, ...] | None
    """The NVIDIA driver version, e.g. (580, 95, 5); None without one."""
    gpu: GpuInfo | None
    mem_total: int
    """/proc/meminfo MemTotal, bytes."""
    mem_available: int
    """/proc/meminfo MemAvailable, bytes."""
    modprobe_override: bool
    """MODPROBE_OVERRIDE exists."""
    resident: tuple[str, ...]
    """Other SGLang engines or ling-chat processes, as `pid NNN: cmdline`."""
    disk_free: int
    """Free bytes where the checkpoint is downloaded to."""
    import_errors: Mapping[str, str] = field(default_factory=dict)
    """The lever packages (of Plan.packages) that failed to import: module -> the error."""
    own_resident: str = ""
    """ling-chat's own resident engine (`keep_engine`), when one runs: `pid N, MODEL, PROFILE`."""
    checkpoint: CheckpointReport | None = None
    """The local checkpoint folder's headers against the loader's tensors; None when no
    weights are read here (a Hugging Face id: the engine checks it after its download;
    load_format=dummy: none are read)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What the start will take."""

    mem_fraction: float
    weights_bytes: int
    """The checkpoint's safetensors bytes (KNOWN_WEIGHTS_BYTES before it is downloaded)."""
    download_bytes_missing: int
    """Bytes of the checkpoint and of the draft model not yet on disk."""
    packages: tuple[Package, ...] = ()
    """The modules the profiles' levers run on (`app.levers.profiles.packages`)."""
    gpu_floors: tuple[GpuFloor, ...] = ()
    """The oldest GPU each lever of the profiles runs on."""


@dataclass(frozen=True, slots=True)
class GpuFloor:
    """A lever's oldest GPU (its `runs_on.min_sm`)."""

    lever: str
    """The lever in words."""
    min_sm: int
    why: str

    @classmethod
    def of(cls, profile: Profile) -> tuple[GpuFloor, ...]:
        """The floors of a profile's levers that have one."""
        return tuple(
            cls(lever.called, lever.runs_on.min_sm, lever.runs_on.why)
            for lever in profile.levers
            if lever.runs_on.min_sm is not None
        )


@dataclass(frozen=True, slots=True)
class Check:
    """One preflight line."""

    name: str
    ok: bool
    message: str
    fix: str = ""

    def line(self) -> str:
        """`ok   nvcc: ...` or `FAIL nvcc: ...; fix: ...`."""
        fix = f"; fix: {self.fix}" if not self.ok and self.fix else ""
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.message}{fix}"


def run_preflight(probes: Probes, plan: Plan) -> list[Check]:
    """Every check, in the order a user fixes them."""
    return [
        *(_package(probes, package) for package in plan.packages),
        _nvcc(probes),
        _cxx(probes),
        _driver(probes),
        _cuda_memory(probes),
        _gpu_floors(probes, plan),
        _memory_fit(probes, plan),
        _resident(probes),
        _disk(probes, plan),
        _checkpoint(probes),
    ]


def gib(n: float) -> str:
    """Bytes as `12.3 GiB`."""
    return f"{n / GIB:.1f} GiB"


def is_unified(gpu: GpuInfo | None) -> bool:
    """True for a GPU that shares the machine's memory (its OOM can wedge the machine)."""
    return gpu is not None and (gpu.sm in UNIFIED_SMS or "GB10" in gpu.name)


def _package(p: Probes, package: Package) -> Check:
    name, module = f"lever package {package.dist}", package.module
    if module in p.import_errors:
        error = f"`import {module}` failed: {p.import_errors[module]}"
        return Check(name, False, error, package.fix)
    return Check(name, True, f"`import {module}` works")


def _gpu_floors(p: Probes, plan: Plan) -> Check:
    name = "levers on this GPU"
    if p.gpu is None:
        return Check(name, True, "no GPU to judge (see the GPU memory line)")
    old = [floor for floor in plan.gpu_floors if p.gpu.sm < floor.min_sm]
    if old:
        return Check(
            name,
            False,
            "; ".join(f"{f.lever} runs on sm_{f.min_sm} or newer ({f.why})" for f in old)
            + f", not on this sm_{p.gpu.sm}",
            "run a profile without it (--profile baseline runs the official recipe)",
        )
    floors = ", ".join(sorted({f"sm_{f.min_sm}" for f in plan.gpu_floors})) or "none"
    return Check(name, True, f"sm_{p.gpu.sm} (the levers need {floors})")


def _nvcc(p: Probes) -> Check:
    where = "CUDA_HOME, CUDA_PATH, PATH or /usr/local/cuda"
    fix = f"install the CUDA toolkit {MIN_CUDA[0]}.{MIN_CUDA[1]}+ and set CUDA_HOME to it"
    if p.nvcc is None:
        return Check("nvcc", False, f"not found in {where}", fix)
    if p.cuda_version is None or p.cuda_version < MIN_CUDA:
        found = ".".join(map(str, p.cuda_version)) if p.cuda_version else "unknown"
        return Check("nvcc", False, f"{p.nvcc} is CUDA {found}, JIT builds need 12.9+", fix)
    return Check("nvcc", True, f"{p.nvcc} (CUDA {p.cuda_version[0]}.{p.cuda_version[1]})")


def _cxx(p: Probes) -> Check:
    if p.cxx is None:
        return Check(
            "C++ compiler",
            False,
            "neither $CXX nor c++ found (nvcc hands host code to it)",
            "sudo apt install g++ (it provides c++), or set CXX",
        )
    return Check("C++ compiler", True, p.cxx)


def _driver(p: Probes) -> Check:
    fix = f"install NVIDIA driver {MIN_DRIVER} or newer (CUDA 13.0 runtime of torch's cu130 wheel)"
    if p.driver is None:
        return Check("driver", False, "no NVIDIA driver found", fix)
    version = ".".join(map(str, p.driver))
    if p.driver[0] < MIN_DRIVER:
        return Check("driver", False, f"{version} is older than {MIN_DRIVER}", fix)
    return Check("driver", True, version)


def _cuda_memory(p: Probes) -> Check:
    if p.gpu is None:
        return Check("GPU memory", False, "no CUDA GPU found", "check nvidia-smi")
    reported = f"{p.gpu.name} (sm_{p.gpu.sm}) reports {gib(p.gpu.total_bytes)}"
    if not is_unified(p.gpu):
        return Check("GPU memory", True, reported)
    if p.gpu.total_bytes < CUDA_SHARE_OF_MEMTOTAL * p.mem_total:
        cause = f"{MODPROBE_OVERRIDE} caps it" if p.modprobe_override else "something caps it"
        return Check(
            "GPU memory",
            False,
            f"{reported} of the machine's {gib(p.mem_total)}: {cause}",
            f"remove {MODPROBE_OVERRIDE} (if present), run sudo update-initramfs -u, reboot",
        )
    return Check("GPU memory", True, f"{reported} of {gib(p.mem_total)} (unified)")


def _memory_fit(p: Probes, plan: Plan) -> Check:
    name = "memory fit"
    if not is_unified(p.gpu) or p.gpu is None:
        return Check(name, True, "not a unified-memory GPU: SGLang's own limit applies")
    share = plan.mem_fraction * p.gpu.total_bytes
    lower = f"lower mem_fraction (now {plan.mem_fraction:g})"
    if plan.weights_bytes > share:
        return Check(
            name,
            False,
            f"weights {gib(plan.weights_bytes)} exceed mem_fraction {plan.mem_fraction:g} "
            f"of {gib(p.gpu.total_bytes)} ({gib(share)})",
            "raise mem_fraction, or fix the GPU memory line above",
        )
    need = share + COMPILE_MARGIN
    parts = (
        f"weights {gib(plan.weights_bytes)} + caches {gib(share - plan.weights_bytes)} "
        f"+ compile margin {gib(COMPILE_MARGIN)} = {gib(need)}"
    )
    if p.mem_available < need:
        return Check(
            name,
            False,
            f"{parts}, but only {gib(p.mem_available)} is available: refusing rather than "
            "wedging the machine",
            f"close what holds memory (free shows it), or {lower}",
        )
    return Check(name, True, f"{parts} of {gib(p.mem_available)} available")


def _resident(p: Probes) -> Check:
    if p.resident and p.own_resident:
        return Check(
            "no other engine",
            False,
            f"ling-chat's resident engine is loaded ({p.own_resident})",
            "attach to it: start the chat with its settings and keep_engine; or unload it: "
            "`ling-chat engine stop`",
        )
    if p.resident:
        return Check(
            "no other engine",
            False,
            "already running: " + "; ".join(p.resident),
            "quit it (or kill its process group) and wait until its memory is free",
        )
    return Check("no other engine", True, "no SGLang engine or ling-chat running")


def _disk(p: Probes, plan: Plan) -> Check:
    need = plan.download_bytes_missing + KERNEL_CACHE_BYTES
    what = f"{gib(plan.download_bytes_missing)} to download + {gib(KERNEL_CACHE_BYTES)} kernels"
    if p.disk_free < need:
        return Check(
            "disk",
            False,
            f"{what}, but {gib(p.disk_free)} free",
            "free disk space, or set HF_HOME to a larger disk",
        )
    return Check("disk", True, f"{what}; {gib(p.disk_free)} free")


def _checkpoint(p: Probes) -> Check:
    report = p.checkpoint
    if report is None:
        return Check("checkpoint", True, "not read here (a Hub id: after its download)")
    if report.ok:
        return Check("checkpoint", True, report.line())
    return Check(
        "checkpoint",
        False,
        f"{report.folder}: {report.line()}",
        "download the checkpoint again, or redo the conversion that wrote it",
    )
