"""The engine double's processes see none of an installed engine: the suite passes in a venv
with the `engine` extra (the README's two commands share one) as in one without it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from app.backend.engine.setup import ENGINE_PACKAGES
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[3]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
GPU_FACTS = "from app.backend.engine.setup import gpu_facts; print(gpu_facts())"


def installed_engine_double(site: Path) -> Path:
    """A site folder holding what the real engine installs beside SGLang: an `sgl_kernel`
    that, as 0.4.10's `load_utils` does, asks the torch it finds for CUDA, and FlashInfer."""
    (site / "sgl_kernel").mkdir(parents=True)
    (site / "sgl_kernel" / "__init__.py").write_text("import torch\ntorch.cuda.is_available()\n")
    (site / "sgl_kernel" / "flash_ops.py").write_text("")
    (site / "flashinfer").mkdir()
    (site / "flashinfer" / "__init__.py").write_text("")
    return site


def test_an_installed_engine_is_not_mixed_into_the_double(end_to_end: None, tmp_path: Path) -> None:
    site = installed_engine_double(tmp_path / "site-packages")
    done = subprocess.run(
        [sys.executable, "-c", GPU_FACTS],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [DOUBLE, ROOT, site]))},
        timeout=scaled(60),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "GpuFacts(sm=90, has_fa3=False, has_flashinfer=False, has_xgrammar=False)"
    )


@pytest.fixture
def engine_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang (the double) imported in this process, down to the module the engine loads."""
    monkeypatch.syspath_prepend(str(DOUBLE))
    for name in [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)
    with warnings.catch_warnings():  # the double's, as SGLang's own import warnings
        warnings.simplefilter("ignore")
        importlib.import_module("sglang.srt.entrypoints.engine")


def test_engine_not_installed_hides_an_engine_already_imported(
    engine_imported: None, engine_not_installed: None
) -> None:
    assert [importlib.util.find_spec(name) for name in ENGINE_PACKAGES] == [None, None, None]
    with pytest.raises(ModuleNotFoundError):
        from sglang.srt.entrypoints.engine import Engine  # noqa: F401
