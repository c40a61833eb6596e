"""A checkpoint fetched from the Hub (a double of it) is checked before SGLang reads it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backend.download import fetch_checkpoint
from app.backend.engine.boot.boot_log import LOAD_STAGE
from app.backend.engine.config import EngineConfig
from app.backend.engine.download_stage import DOWNLOAD_STAGE, refuse_unloadable_download
from app.backend.engine.engine import EngineBackend
from app.core.errors import BackendError, CheckpointRefused, PreflightFailed
from tests.backend.checkpoint.test_checkpoint import small_config
from tests.fixtures.engine_double.double_world import DOUBLED, NOT_INSTALLED
from tests.fixtures.hub_double import FakeHubDouble, serving
from tests.gpu.checkpoint import write_checkpoint
from tests.support import broken_checkpoint as broken

REPO = "inclusionAI/Ling-small-fp4"
DOUBLE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "engine_double"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("checkpoint") / "ling-small"
    return write_checkpoint(folder, config=small_config(), tokenizer=False)


def files(folder: Path) -> dict[str, bytes]:
    return {item.name: item.read_bytes() for item in folder.iterdir()}


def test_a_whole_download_passes_and_a_broken_one_is_refused_naming_tensor_and_file(
    good: Path, tmp_path: Path
):
    with serving(FakeHubDouble(REPO, files(good))):
        fetch_checkpoint(REPO)
    refuse_unloadable_download(EngineConfig(REPO))  # nothing to refuse
    tensor, file = broken.break_copy(good, tmp_path / "broken", "scale_shape")
    with serving(FakeHubDouble("inclusionAI/Ling-broken", files(tmp_path / "broken"))):
        fetch_checkpoint("inclusionAI/Ling-broken")
    with pytest.raises(CheckpointRefused) as refused:
        refuse_unloadable_download(EngineConfig("inclusionAI/Ling-broken"))
    assert isinstance(refused.value, BackendError)  # the chat's start-up screen shows it
    assert isinstance(refused.value, PreflightFailed)  # the commands exit 3
    assert f"{file}: {tensor} has shape" in str(refused.value)
    assert "\n" not in str(refused.value)
    dummy = EngineConfig("inclusionAI/Ling-broken", overrides={"load_format": "dummy"})
    refuse_unloadable_download(dummy)  # dummy weights read no file


@pytest.fixture
def engine_double(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """SGLang and torch (the doubles) importable, even where the `engine` extra's real ones
    were imported before; what the test imports of them is dropped, the real ones come back."""
    for name in [n for n in sys.modules if n.split(".")[0] in DOUBLED]:
        monkeypatch.delitem(sys.modules, name)
    for name in NOT_INSTALLED:  # the `engine` extra's other packages, as in the double's world
        monkeypatch.setitem(sys.modules, name, None)
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(DOUBLE))
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] in DOUBLED:
            del sys.modules[name]


@pytest.mark.filterwarnings("ignore:an import warning")  # the SGLang double's, as SGLang's own
async def test_the_engine_refuses_it_after_the_download_before_loading(
    good: Path, tmp_path: Path, engine_double: None
):
    tensor, file = broken.break_copy(good, tmp_path / "broken", "missing_tensor")
    backend = EngineBackend(EngineConfig(REPO, log_dir=tmp_path))
    stages = []
    hub = FakeHubDouble(REPO, files(tmp_path / "broken"))
    with serving(hub), pytest.raises(CheckpointRefused, match=f"{file}: lacks {tensor}"):
        async for stage in backend.start():
            stages.append(stage.name)
    assert DOWNLOAD_STAGE in stages and LOAD_STAGE not in stages
    await backend.shutdown()
