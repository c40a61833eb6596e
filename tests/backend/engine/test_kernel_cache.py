"""Kernel caches heal: on real files, each entry that cannot be valid is removed with a line,
valid ones and everything outside the caches stay, and the prepare then runs again."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from app.backend.engine import kernel_cache
from app.backend.engine.kernel_cache import Cache, binary_problem, caches, heal
from app.backend.firststart.first_start import PreparedBackend
from app.backend.firststart.prepare import (
    CACHE_STAGE,
    PREPARE_STAGE,
    heal_kernel_caches,
    marker_dir,
)
from tests.backend.firststart.test_prepare import DummyEngineDouble, spec  # noqa: F401 - the fixture

SECTIONS = 3


def elf(path: Path, keep: int | None = None) -> Path:
    """A little-endian ELF64 file whose section table ends at byte 64 + 3 x 64 = 256, cut to
    `keep` bytes (None: whole)."""
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<QQ", header, 0x20, 0, 64)  # no program headers; sections at 64
    struct.pack_into("<HHHH", header, 0x36, 56, 0, 64, SECTIONS)
    data = bytes(header) + b"\x00" * 64 * SECTIONS
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if keep is None else data[:keep])
    return path


def test_a_binary_must_be_a_whole_elf_file(tmp_path):
    assert binary_problem(elf(tmp_path / "ok.cubin")) is None
    assert binary_problem(elf(tmp_path / "empty.cubin", 0)) == "empty empty.cubin"
    assert binary_problem(elf(tmp_path / "stub.so", 40)) == (
        "stub.so truncated: 40 bytes, shorter than its ELF header"
    )
    assert binary_problem(elf(tmp_path / "cut.cubin", 200)) == (
        "cut.cubin truncated: 200 of the 256 bytes its ELF header names"
    )
    (tmp_path / "text.so").write_text("not a binary at all, but long enough" * 3)
    assert binary_problem(tmp_path / "text.so") == "text.so is not an ELF binary"


def humming_cache(root: Path) -> dict[str, Path]:
    """Humming's layout: <hash>/kernel.cubin beside its source."""
    entries = {
        "ok": elf(root / "aaaa" / "kernel.cubin"),
        "empty": elf(root / "bbbb" / "kernel.cubin", 0),
        "cut": elf(root / "cccc" / "kernel.cubin", 100),
        "tmp left": elf(root / "dddd" / "kernel_tmp.cubin", 10),
    }
    for path in entries.values():
        (path.parent / "kernel.cu").write_text("// source")
    (root / "eeee").mkdir()
    (root / "eeee" / "kernel.cu").write_text("// killed before nvrtc finished")
    entries["source only"] = root / "eeee" / "kernel.cu"
    return entries


def test_every_invalid_humming_kernel_goes_and_the_valid_one_stays(tmp_path):
    root = tmp_path / "humming"
    entries = humming_cache(root)
    removed = heal([Cache("Humming", root)])
    assert sorted(r.path.name for r in removed) == ["bbbb", "cccc", "dddd", "eeee"]
    assert entries["ok"].is_file()
    assert sorted(p.name for p in root.iterdir()) == ["aaaa"]
    lines = sorted(r.line() for r in removed)
    assert (
        lines[0]
        == f"removed {root / 'bbbb'} from the Humming cache (empty kernel.cubin); it is rebuilt"
    )
    assert "a Humming kernel's source without its kernel.cubin" in lines[3]
    assert heal([Cache("Humming", root)]) == []  # healed: nothing left to remove


def test_flashinfer_triton_and_sglang_entries_are_each_named_by_their_cache(tmp_path):
    env = {"SGLANG_CACHE_DIR": str(tmp_path / "sglang"), "HUMMING_CACHE_DIR": str(tmp_path / "h")}
    found = caches({**env, "HOME": str(tmp_path / "home")})
    assert all(tmp_path in c.root.parents for c in found)
    by_name = {c.name: c.root for c in reversed(found)}  # each name's first: SGLang's own
    ops = by_name["FlashInfer JIT"] / "0.7.2" / "90" / "cached_ops"
    elf(ops / "norm" / "norm.so", 0)
    elf(ops / "gemm" / "gemm.so")
    (ops / "gemm" / "gemm.lock").touch()  # a finished build keeps its lock: fine
    (ops / "sampling").mkdir(parents=True)
    (ops / "sampling" / "build.ninja").write_text("rule nvcc")
    (ops / "sampling" / "sampling.lock").touch()
    elf(by_name["Triton"] / "h4sh" / "_kda_fwd.cubin", 64)
    elf(by_name["SGLang JIT"] / "jit" / "tree" / "tree.so", 0)
    (by_name["SGLang JIT"] / "jit" / "src").mkdir()
    (by_name["SGLang JIT"] / "jit" / "src" / "kernel.cu").write_text("// not Humming's: kept")
    outside = elf(tmp_path / "elsewhere" / "broken.cubin", 0)
    removed = {(r.cache.name, r.path.name, r.why) for r in heal(found)}
    assert removed == {
        ("FlashInfer JIT", "norm", "empty norm.so"),
        ("FlashInfer JIT", "sampling", "a build with a lock and no output"),
        ("Triton", "h4sh", "_kda_fwd.cubin truncated: 64 of the 256 bytes its ELF header names"),
        ("SGLang JIT", "tree", "empty tree.so"),
    }
    assert (ops / "gemm" / "gemm.so").is_file() and outside.is_file()
    assert (by_name["SGLang JIT"] / "jit" / "src" / "kernel.cu").is_file()


def test_a_binary_at_a_cache_s_root_goes_alone(tmp_path):
    root = tmp_path / "triton"
    bad, good = elf(root / "a.cubin", 0), elf(root / "b.cubin")
    (removed,) = heal([Cache("Triton", root)])
    assert removed.path == bad and not bad.exists() and good.is_file()


def test_healing_forgets_the_prepare_markers_only_when_it_removed_something(tmp_path, monkeypatch):
    monkeypatch.setenv("HUMMING_CACHE_DIR", str(tmp_path / "humming"))
    monkeypatch.setenv("SGLANG_CACHE_DIR", str(tmp_path / "sglang"))
    marker = marker_dir() / "abc.json"
    marker.parent.mkdir(parents=True)
    marker.write_text("{}")
    assert heal_kernel_caches() == [] and marker.is_file()
    elf(tmp_path / "humming" / "ffff" / "kernel.cubin", 0)
    (line,) = heal_kernel_caches()
    assert line.startswith(f"removed {tmp_path / 'humming' / 'ffff'} from the Humming cache")
    assert not marker.exists()


async def test_the_start_heals_first_then_prepares_again(spec, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HUMMING_CACHE_DIR", str(tmp_path / "humming"))
    backend = PreparedBackend(DummyEngineDouble(spec.config), lambda: spec, DummyEngineDouble)
    [s async for s in backend.start()]  # prepared: its marker is written
    assert spec.marker().is_file() and json.loads(spec.marker().read_text())
    for hash_dir in ("1111", "2222"):
        elf(tmp_path / "humming" / hash_dir / "kernel.cubin", 0)
    DummyEngineDouble.started = []
    seen = [
        s
        async for s in PreparedBackend(
            DummyEngineDouble(spec.config), lambda: spec, DummyEngineDouble
        ).start()
    ]
    assert [s.name for s in seen[:3]] == [CACHE_STAGE] * 3
    assert (
        "1111" in seen[0].detail + seen[1].detail and seen[2].detail == "2 invalid entries removed"
    )
    assert PREPARE_STAGE in [s.name for s in seen]
    assert len(DummyEngineDouble.started) == 2  # the dummy model again, then the real one


def test_nothing_is_removed_from_a_cache_that_does_not_exist(tmp_path):
    assert heal([Cache("Humming", tmp_path / "none")]) == []
    roots = {(c.name, c.root) for c in kernel_cache.caches({"HOME": "/h"})}
    assert roots == {
        ("Humming", Path("~/.humming/cache").expanduser()),
        ("FlashInfer JIT", Path("~/.cache/sglang/.cache/flashinfer").expanduser()),
        ("FlashInfer JIT", Path("/h/.cache/flashinfer")),
        ("Triton", Path("~/.cache/sglang/triton").expanduser()),
        ("Triton", Path("/h/.triton/cache")),
        ("SGLang JIT", Path("~/.cache/sglang").expanduser()),
    }


@pytest.mark.parametrize("name", ["kernel.cubin", "mod.so"])
def test_a_symlinked_binary_is_left_alone(tmp_path, name):
    root = tmp_path / "cache"
    target = elf(tmp_path / "elsewhere" / name, 0)
    (root / "entry").mkdir(parents=True)
    (root / "entry" / name).symlink_to(target)
    assert heal([Cache("Humming", root)]) == []
    assert target.exists()


def test_a_kernel_cuda_refuses_names_its_file_and_cache_as_the_humming_line(tmp_path):
    """The scheduler's guard over Humming's load; the engine turns its refusal into the line."""
    from app.backend.engine.patches.boundary import REFUSAL
    from app.backend.engine.patches.kernel_load import guarded
    from app.backend.proof import refusal_report

    cubin = tmp_path / "cache" / "abcd" / "kernel.cubin"

    def load(kernel: object) -> None:
        raise AssertionError("<CUresult.CUDA_ERROR_INVALID_IMAGE: 200>")

    kernel = type("HummingKernel", (), {"kernel_filename": str(cubin)})()
    with pytest.raises(RuntimeError) as caught:
        guarded(load, lambda: str(tmp_path / "cache"))(kernel)
    match = REFUSAL.search(str(caught.value))
    assert match is not None and match.group(1) == "humming"
    line = refusal_report("stack", match.group(1), match.group(2)).lines[0]
    assert line.evidence == (
        f"CUDA cannot load the cached Humming kernel {cubin} (CUDA_ERROR_INVALID_IMAGE): "
        f"delete {cubin.parent}, or clear {tmp_path / 'cache'}; the next start rebuilds it"
    )


def test_another_load_failure_passes_through_the_guard_unchanged():
    from app.backend.engine.patches.kernel_load import guarded

    def load(kernel: object) -> None:
        raise AssertionError("(file, name, [])")

    with pytest.raises(AssertionError, match=r"\(file, name, \[\]\)"):
        guarded(load, lambda: "/c")(object())


def test_an_invalid_image_elsewhere_names_every_cache_to_clear(tmp_path):
    env = {"SGLANG_CACHE_DIR": str(tmp_path / "s"), "HUMMING_CACHE_DIR": str(tmp_path / "h")}
    hint = kernel_cache.invalid_image_hint("AssertionError: CUDA_ERROR_INVALID_IMAGE", env)
    assert hint.startswith("; a cached kernel binary is invalid: clear the kernel caches (Humming ")
    assert str(tmp_path / "s" / "triton") in hint
    assert kernel_cache.invalid_image_hint("RuntimeError: out of memory", env) == ""
