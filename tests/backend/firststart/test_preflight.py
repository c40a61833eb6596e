"""The preflight: each refusal from injected probe results, and the probes' parsers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from app.backend.firststart import probes as probes_mod
from app.backend.firststart.preflight import (
    GIB,
    KNOWN_DRAFT_BYTES,
    KNOWN_WEIGHTS_BYTES,
    MODPROBE_OVERRIDE,
    GpuFloor,
    GpuInfo,
    Plan,
    Probes,
    run_preflight,
)
from app.levers.backends import FLASHINFER
from app.levers.model.humming import HUMMING
from tests.support.preflight import GB10, HEALTHY_SPARK

H200 = GpuInfo(name="NVIDIA H200", sm=90, total_bytes=140 * GIB)
PLAN = Plan(mem_fraction=0.65, weights_bytes=66 * 10**9, download_bytes_missing=0)


def failures(probes: Probes, plan: Plan = PLAN) -> dict[str, str]:
    return {c.name: c.line() for c in run_preflight(probes, plan) if not c.ok}


def spark(**changes: object) -> Probes:
    return dataclasses.replace(HEALTHY_SPARK, **changes)  # type: ignore[arg-type]


def test_a_healthy_spark_passes_every_check():
    checks = run_preflight(HEALTHY_SPARK, PLAN)
    assert [c.ok for c in checks] == [True] * 9
    assert all(c.line().startswith("ok   ") for c in checks)


@pytest.mark.parametrize(
    ("changes", "name", "says"),
    [
        ({"nvcc": None, "cuda_version": None}, "nvcc", "not found in CUDA_HOME, CUDA_PATH, PATH"),
        ({"cuda_version": (12, 8)}, "nvcc", "is CUDA 12.8, JIT builds need 12.9+"),
        ({"cxx": None}, "C++ compiler", "neither $CXX nor c++ found"),
        ({"driver": (570, 86, 10)}, "driver", "570.86.10 is older than 580"),
        ({"driver": None}, "driver", "no NVIDIA driver found"),
        ({"gpu": None}, "GPU memory", "no CUDA GPU found"),
        (
            {"resident": ("pid 4242: sglang::scheduler",)},
            "no other engine",
            "already running: pid 4242: sglang::scheduler",
        ),
        ({"disk_free": 1 * GIB}, "disk", "but 1.0 GiB free"),
    ],
)
def test_each_failure_is_one_line_with_its_fix(changes: dict[str, object], name: str, says: str):
    failed = failures(spark(**changes))
    assert list(failed) == [name]
    line = failed[name]
    assert line.startswith(f"FAIL {name}: ") and says in line and "; fix: " in line
    assert "\n" not in line


def test_ling_chats_own_resident_engine_is_named_with_attach_or_stop():
    own = "pid 4242, /models/ling, profile stack"
    failed = failures(spark(resident=("pid 4250: sglang::scheduler",), own_resident=own))
    assert failed == {
        "no other engine": f"FAIL no other engine: ling-chat's resident engine is loaded ({own}); "
        "fix: attach to it: start the chat with its settings and keep_engine; or unload it: "
        "`ling-chat engine stop`"
    }


def test_the_modprobe_override_is_named_when_cuda_reports_half_the_memory():
    capped = spark(gpu=dataclasses.replace(GB10, total_bytes=62 * GIB), modprobe_override=True)
    failed = failures(capped)
    assert "GPU memory" in failed
    assert (
        f"reports 62.0 GiB of the machine's 121.0 GiB: {MODPROBE_OVERRIDE} caps it"
        in (failed["GPU memory"])
    )
    assert f"fix: remove {MODPROBE_OVERRIDE}" in failed["GPU memory"]


def test_a_gpu_older_than_a_lever_s_floor_fails_naming_the_lever_and_the_gpu():
    from app.levers.profiles import PROFILES

    ampere = GpuInfo(name="NVIDIA A100", sm=80, total_bytes=80 * GIB)
    stack = dataclasses.replace(PLAN, gpu_floors=GpuFloor.of(PROFILES["stack"]))
    line = failures(spark(gpu=ampere), stack)["levers on this GPU"]
    assert "the FP8 LM head lever runs on sm_89 or newer" in line
    assert "not on this sm_80" in line and "the Humming MoE lever" not in line
    baseline = dataclasses.replace(PLAN, gpu_floors=GpuFloor.of(PROFILES["baseline"]))
    assert "levers on this GPU" not in failures(spark(gpu=ampere), baseline)
    assert "levers on this GPU" not in failures(spark(gpu=H200), stack)


def test_a_discrete_gpu_is_not_held_to_the_machines_memory():
    checks = run_preflight(spark(gpu=H200, mem_total=2000 * GIB, mem_available=4 * GIB), PLAN)
    assert all(c.ok for c in checks)


def test_a_spark_without_room_for_weights_caches_and_compiles_refuses_rather_than_wedges():
    # 0.65 x 119.6 GiB = 77.7 GiB for SGLang + 10 GiB compile margin = 87.7 GiB
    assert "memory fit" not in failures(spark(mem_available=88 * GIB))
    line = failures(spark(mem_available=87 * GIB))["memory fit"]
    assert "weights 61.5 GiB + caches 16.3 GiB + compile margin 10.0 GiB = 87.7 GiB" in line
    assert "only 87.0 GiB is available: refusing rather than wedging" in line


def test_weights_beyond_the_memory_fraction_are_refused():
    line = failures(spark(), dataclasses.replace(PLAN, mem_fraction=0.45))["memory fit"]
    assert "weights 61.5 GiB exceed mem_fraction 0.45 of 119.6 GiB (53.8 GiB)" in line


def test_the_download_still_missing_must_fit_on_disk():
    plan = dataclasses.replace(PLAN, download_bytes_missing=KNOWN_WEIGHTS_BYTES)
    assert "disk" in failures(spark(disk_free=60 * GIB), plan)
    assert "disk" not in failures(spark(disk_free=70 * GIB), plan)


def test_parsers_read_the_real_formats():
    nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88"
    assert probes_mod.parse_nvcc_release(nvcc) == (13, 0)
    assert probes_mod.parse_nvcc_release("") is None
    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05  Release Build"
    assert probes_mod.parse_driver(proc) == (580, 95, 5)
    assert probes_mod.parse_driver("") is None
    row = probes_mod.parse_smi("NVIDIA GB10, [N/A], 12.1, 580.95.05")
    assert row == probes_mod.SmiRow("NVIDIA GB10", None, 121, (580, 95, 5))
    h200 = probes_mod.parse_smi("NVIDIA H200, 143771 MiB, 9.0, 570.133.20")
    assert h200 is not None and (h200.total_bytes, h200.sm) == (143771 * 1024**2, 90)
    assert probes_mod.parse_smi("No devices were found") is None
    meminfo = "MemTotal:       126877952 kB\nMemAvailable:   120000000 kB\n"
    assert probes_mod.parse_meminfo(meminfo, "MemAvailable") == 120000000 * 1024


def _process(proc: Path, pid: int, argv: list[str], comm: str) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "cmdline").write_text("\0".join(argv) + "\0")
    (proc / str(pid) / "comm").write_text(comm + "\n")


def test_resident_engines_are_found_by_name_and_command_line_not_other_ling_chats(tmp_path: Path):
    _process(tmp_path, 10, ["sglang::scheduler"], "sglang::schedu")
    _process(tmp_path, 11, ["/usr/bin/python3", "-m", "sglang.launch_server", "--port", "1"], "py")
    _process(tmp_path, 12, ["/usr/bin/python3", "/home/u/.venv/bin/ling-chat"], "ling-chat")
    _process(tmp_path, 13, ["/usr/bin/python3", "/home/u/.venv/bin/ling-chat", "doctor"], "x")
    _process(tmp_path, 14, ["vim", "/home/u/ling-chat/README.md"], "vim")
    _process(tmp_path, 15, ["bash"], "bash")
    _process(tmp_path, 16, ["sglang::detokenizer"], "sglang::detoke")
    found = probes_mod.resident_processes(tmp_path, exclude={13})
    # A ling-chat command with no engine (12: `--server`, `history`) holds no GPU memory.
    assert [line.split(":")[0] for line in found] == ["pid 10", "pid 11", "pid 16"]


def test_the_plan_reads_weights_from_a_local_checkpoint_and_missing_bytes_from_the_cache(
    tmp_path: Path,
):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    for n in range(2):
        (model / f"model-{n}.safetensors").write_bytes(b"x" * 1000)
    plan = probes_mod.build_plan(str(model), 0.65, tmp_path / "hub")
    assert (plan.weights_bytes, plan.download_bytes_missing) == (2000, 0)
    blobs = tmp_path / "hub" / "models--inclusionAI--Ling-3.0-flash-fp4" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "a").write_bytes(b"x" * 500)
    (blobs / "b.incomplete").write_bytes(b"x" * 300)
    plan = probes_mod.build_plan("inclusionAI/Ling-3.0-flash-fp4", 0.65, tmp_path / "hub")
    assert plan.download_bytes_missing == KNOWN_WEIGHTS_BYTES - 500


def test_the_plan_counts_what_the_cache_lacks_of_a_hub_draft(tmp_path: Path):
    model = tmp_path / "model"
    model.mkdir()
    blobs = tmp_path / "hub" / "models--inclusionAI--Ling-3.0-flash-dspark" / "blobs"
    blobs.mkdir(parents=True)
    (blobs / "a").write_bytes(b"x" * 700)
    draft = "inclusionAI/Ling-3.0-flash-dspark"
    plan = probes_mod.build_plan(str(model), 0.65, tmp_path / "hub", [draft])
    assert plan.download_bytes_missing == KNOWN_DRAFT_BYTES - 700
    plan = probes_mod.build_plan(str(model), 0.65, tmp_path / "hub", [str(model)])
    assert plan.download_bytes_missing == 0  # a local draft folder


def test_each_profile_needs_the_packages_its_levers_run_on():
    from app.levers.profiles import PROFILES, packages_of

    def modules(profile: str) -> tuple[str, ...]:
        return tuple(package.module for package in packages_of(PROFILES[profile]))

    assert modules("stack") == ("humming", "flashinfer")
    assert modules("baseline") == ("humming", "flashinfer")
    assert modules("humming+fp8") == ("humming",)


def test_a_lever_package_that_cannot_be_imported_is_the_first_line_with_its_fix():
    plan = dataclasses.replace(PLAN, packages=(HUMMING, FLASHINFER))
    broken = spark(import_errors={"humming": "ModuleNotFoundError: No module named 'humming'"})
    checks = run_preflight(broken, plan)
    assert [c.ok for c in checks[:2]] == [False, True]
    assert checks[0].line() == (
        "FAIL lever package humming-kernels: `import humming` failed: ModuleNotFoundError: "
        "No module named 'humming'; fix: pip install humming-kernels==0.1.12 cuda-python (NVRTC)"
    )
    assert checks[1].line() == "ok   lever package flashinfer-python: `import flashinfer` works"
    assert all(c.ok for c in run_preflight(HEALTHY_SPARK, plan))


def test_a_package_found_but_broken_fails_its_import_as_in_the_scheduler(tmp_path, monkeypatch):
    shadow = tmp_path / "humming_shadow"
    (shadow / "fakelever").mkdir(parents=True)
    (shadow / "fakelever" / "__init__.py").write_text("raise ImportError('libcuda.so: nope')\n")
    monkeypatch.syspath_prepend(str(shadow))
    errors = probes_mod.import_errors(["fakelever", "json", "no_such_lever_module"])
    assert errors == {
        "fakelever": "ImportError: libcuda.so: nope",
        "no_such_lever_module": "ModuleNotFoundError: No module named 'no_such_lever_module'",
    }
