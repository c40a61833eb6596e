"""Find and remove kernel-cache entries that cannot be valid, before the engine starts.

A full disk or a killed first start can leave an empty or truncated binary in a kernel
cache, and the builders reuse what they find: Humming loads any existing `kernel.cubin`
(CUDA_ERROR_INVALID_IMAGE on every later start), ninja keeps an output newer than its
inputs. A binary (`.cubin`, `.so`) must be a whole ELF file: its header, magic and every
table the header points at inside the file. A build directory holding a lock and a
`build.ninja` but no binary, or a Humming kernel's source without its cubin, is a build
that did not finish. Each such entry (its directory under the cache's root) is removed,
so that the next build makes it again; nothing outside a cache's root is touched.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

ELF_MAGIC = b"\x7fELF"
ELF64_HEADER = 64
BINARY_SUFFIXES = (".cubin", ".so")


@dataclass(frozen=True, slots=True)
class Cache:
    """One kernel cache: its name in lines and the folder it lives in."""

    name: str
    root: Path


@dataclass(frozen=True, slots=True)
class Removed:
    """An entry that could not be valid, removed."""

    cache: Cache
    path: Path
    why: str

    def line(self) -> str:
        """`removed ... from the Humming cache: empty kernel.cubin; it is rebuilt`."""
        return f"removed {self.path} from the {self.cache.name} cache ({self.why}); it is rebuilt"


def caches(env: Mapping[str, str]) -> list[Cache]:
    """The caches ling-chat's engine relies on, where `env` puts them: SGLang points
    Triton's and FlashInfer's into its own cache folder unless they are set, and their own
    defaults hold what they built where SGLang's redirect came too late."""
    home = Path(env.get("HOME") or Path.home())
    sglang = Path(env.get("SGLANG_CACHE_DIR") or "~/.cache/sglang").expanduser()
    flashinfer = Path(env.get("FLASHINFER_WORKSPACE_BASE") or sglang).expanduser()
    found = [
        Cache("Humming", Path(env.get("HUMMING_CACHE_DIR") or "~/.humming/cache").expanduser()),
        Cache("FlashInfer JIT", flashinfer / ".cache" / "flashinfer"),
        Cache("FlashInfer JIT", home / ".cache" / "flashinfer"),
        Cache("Triton", Path(env.get("TRITON_CACHE_DIR") or sglang / "triton").expanduser()),
        Cache("Triton", home / ".triton" / "cache"),
        Cache("SGLang JIT", sglang),
    ]
    unique = {cache.root: cache for cache in reversed(found)}  # the first of a root wins
    return [cache for cache in found if unique[cache.root] is cache]


def binary_problem(path: Path) -> str | None:
    """Why a `.cubin` or `.so` cannot be a valid binary, or None."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            header = f.read(ELF64_HEADER)
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if size == 0:
        return f"empty {path.name}"
    if header[:4] != ELF_MAGIC:
        return f"{path.name} is not an ELF binary"
    if header[4] != 2:  # ELF32: no deeper check
        return None
    if size < ELF64_HEADER:
        return f"{path.name} truncated: {size} bytes, shorter than its ELF header"
    fmt = "<" if header[5] == 1 else ">"
    phoff, shoff = struct.unpack_from(fmt + "QQ", header, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from(fmt + "HHHH", header, 0x36)
    need = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    if size < need:
        return f"{path.name} truncated: {size} of the {need} bytes its ELF header names"
    return None


def _unfinished(cache: Cache, names: set[str]) -> str | None:
    """Why a folder of `cache` holding `names` is a build that did not finish, or None."""
    if any(n.endswith(BINARY_SUFFIXES) for n in names):
        return None
    if cache.name == "Humming" and "kernel.cu" in names:
        return "a Humming kernel's source without its kernel.cubin"
    if "build.ninja" in names and any(n.endswith(".lock") for n in names):
        return "a build with a lock and no output"
    return None


def _invalid(cache: Cache, skip: list[Path]) -> Iterator[tuple[Path, str]]:
    """Each entry of `cache` that cannot be valid (`skip`: other caches nested in it)."""
    for folder, dirs, files in os.walk(cache.root):
        here = Path(folder)
        dirs[:] = [d for d in dirs if here / d not in skip]
        if here != cache.root and (why := _unfinished(cache, set(files))):
            dirs[:] = []
            yield here, why
            continue
        binaries = [here / n for n in files if n.endswith(BINARY_SUFFIXES)]
        bad = next(
            ((b, why) for b in binaries if not b.is_symlink() and (why := binary_problem(b))),
            None,
        )
        if bad is not None:
            if here == cache.root:
                yield bad
            else:
                dirs[:] = []  # the whole entry goes
                yield here, bad[1]


def heal(found: list[Cache]) -> list[Removed]:
    """Remove every entry of these caches that cannot be valid; what was removed."""
    removed: list[Removed] = []
    roots = [c.root for c in found]
    for cache in found:
        if not cache.root.is_dir():
            continue
        nested = [r for r in roots if r != cache.root and cache.root in r.parents]
        for path, why in list(_invalid(cache, nested)):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed.append(Removed(cache, path, why))
    return removed


def invalid_image_hint(text: str, env: Mapping[str, str]) -> str:
    """For a start that failed with CUDA_ERROR_INVALID_IMAGE: `; ...` naming the caches to
    clear (a kernel binary CUDA refuses though it is a whole ELF file); else ''."""
    if "CUDA_ERROR_INVALID_IMAGE" not in text:
        return ""
    where = ", ".join(f"{c.name} {c.root}" for c in caches(env))
    return f"; a cached kernel binary is invalid: clear the kernel caches ({where})"
