"""The GPU probe asks the CUDA driver (a double of libcuda here), and `ling-chat` without a
GPU says so in one line, before the full screen opens and before SGLang is imported."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.backend.firststart.gpu_probe import GpuProbe, probe_gpu, require_gpu
from app.core.errors import PreflightFailed
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[3]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
NO_DEVICE = 100


class LibcudaDouble:
    """The four driver calls the probe makes; ctypes `byref` arguments are written through."""

    def __init__(self, init: int = 0, count: int = 1, name: bytes = b"NVIDIA GB10") -> None:
        self.init, self.count, self.name = init, count, name

    def cuInit(self, flags: int) -> int:  # noqa: N802 (the driver's name)
        return self.init

    def cuDeviceGetCount(self, count: Any) -> int:  # noqa: N802
        count._obj.value = self.count
        return 0

    def cuDeviceGet(self, device: Any, ordinal: int) -> int:  # noqa: N802
        device._obj.value = ordinal
        return 0

    def cuDeviceGetName(self, name: Any, length: int, device: Any) -> int:  # noqa: N802
        name.value = self.name
        return 0

    def cuGetErrorName(self, status: int, name: Any) -> int:  # noqa: N802
        name._obj.value = b"CUDA_ERROR_NO_DEVICE" if status == NO_DEVICE else None
        return 0 if status == NO_DEVICE else 1


def loads(driver: LibcudaDouble | None) -> Any:
    def load(name: str) -> LibcudaDouble:
        if driver is None:
            raise OSError(f"{name}: cannot open shared object file")
        return driver

    return load


@pytest.mark.parametrize(
    ("driver", "probe"),
    [
        (LibcudaDouble(), GpuProbe(True, name="NVIDIA GB10")),
        (None, GpuProbe(False, reason="no NVIDIA driver (libcuda.so.1 not found)")),
        (
            LibcudaDouble(init=NO_DEVICE),
            GpuProbe(
                False,
                reason="the NVIDIA driver did not start (CUDA_ERROR_NO_DEVICE (100))",
            ),
        ),
        (
            LibcudaDouble(count=0),
            GpuProbe(
                False, reason="no CUDA device (the driver sees none; CUDA_VISIBLE_DEVICES applies)"
            ),
        ),
    ],
)
def test_the_probe_reports_what_the_driver_says(driver: Any, probe: GpuProbe) -> None:
    assert probe_gpu(loads(driver)) == probe


def test_no_gpu_is_one_line_with_the_reason() -> None:
    with pytest.raises(PreflightFailed) as refused:
        require_gpu(lambda: GpuProbe(False, reason="no NVIDIA driver (libcuda.so.1 not found)"))
    assert str(refused.value).startswith(
        "no usable NVIDIA GPU: no NVIDIA driver (libcuda.so.1 not found); the engine needs one"
    )


SHOW_IMPORTS = (
    "import sys; from app.cli import main; code = main(sys.argv[1:]); "
    "print('sglang imported' if 'sglang' in sys.modules else 'sglang not imported'); "
    "print('app built' if 'app.ui.app' in sys.modules else 'no app built'); sys.exit(code)"
)


def _without_a_gpu(tmp_path: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    """SGLang is importable (the double), the driver finds no device (none visible)."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return subprocess.run(
        [sys.executable, "-c", SHOW_IMPORTS, *command, "--model", str(model)],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)]),
            "CUDA_VISIBLE_DEVICES": "",
        },
        timeout=scaled(60),
    )


@pytest.mark.parametrize("command", [[], ["serve"]])
def test_without_a_gpu_ling_chat_is_one_line_before_sglang_is_imported(
    end_to_end: None, tmp_path: Path, command: list[str]
) -> None:
    done = _without_a_gpu(tmp_path, command)
    assert done.returncode == 3  # the doctor's, below: the preflight's status
    assert done.stderr.startswith("ling-chat: error: no usable NVIDIA GPU: ")
    assert done.stderr.count("\n") == 1
    assert done.stdout.splitlines()[-2:] == ["sglang not imported", "no app built"]


def test_without_a_gpu_the_doctor_prints_its_preflight_before_sglang_is_imported(
    end_to_end: None, tmp_path: Path
):
    done = _without_a_gpu(tmp_path, ["doctor"])
    assert done.returncode == 3
    assert "preflight: FAIL" in done.stdout + done.stderr
    assert done.stderr.splitlines()[-1].startswith("ling-chat: error: the preflight refused")
    assert done.stdout.splitlines()[-2:] == ["sglang not imported", "no app built"]


def test_doctor_keeps_sglangs_import_warnings_off_the_terminal(
    end_to_end: None, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    done = subprocess.run(
        [sys.executable, str(DOUBLE / "cli_session.py"), "doctor", "--model", str(model)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)])},
        timeout=scaled(120),
    )
    assert "Importing SGLang done" in done.stdout
    assert "an import warning" not in done.stdout + done.stderr
    log = Path(os.environ["LING_CHAT_DATA_DIR"]) / "logs" / "sglang.log"
    assert "an import warning, as SGLang 0.5.23 prints three" in log.read_text()


@pytest.mark.parametrize("command", [[], ["serve"], ["doctor"], ["prepare"], ["bench"]])
def test_without_a_gpu_every_command_that_starts_the_engine_exits_3(
    end_to_end: None, tmp_path: Path, command: list[str]
) -> None:
    assert _without_a_gpu(tmp_path, command).returncode == 3
