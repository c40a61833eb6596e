"""The NEXTN draft's file list, cut to the shards of its layer, on real checkpoint files."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.patches import draft_shards
from app.backend.engine.patches.draft_shards import INDEX, own_shards
from app.backend.engine.patches.load_watch import tensor_bytes
from tests.backend.checkpoint.test_checkpoint import small_config
from tests.gpu.checkpoint import write_checkpoint

NEXTN = "model.layers.6"
"""small_config() has 6 layers; SGLang puts the NEXTN layer at index num_hidden_layers."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_checkpoint(
        tmp_path_factory.mktemp("ckpt") / "ling", config=small_config(), tokenizer=False
    )


def shard_files(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.glob("*.safetensors"))


def weight_map(folder: Path) -> dict[str, str]:
    return json.loads((folder / INDEX).read_text())["weight_map"]


def test_the_draft_keeps_every_shard_holding_its_layer_and_no_other(folder: Path) -> None:
    files = shard_files(folder)
    kept, reason = own_shards(str(folder), files, NEXTN)
    assert reason == ""
    holding = {shard for name, shard in weight_map(folder).items() if name.startswith(NEXTN)}
    assert {Path(path).name for path in kept} == holding
    assert 0 < len(kept) < len(files)
    # what the draft's second pass reads now: a small part of the checkpoint, not all of it
    assert tensor_bytes(kept) < 0.5 * tensor_bytes(files)


def test_without_an_index_the_draft_reads_every_shard_and_says_why(
    folder: Path, tmp_path: Path
) -> None:
    files = shard_files(folder)
    kept, reason = own_shards(str(tmp_path), files, NEXTN)
    assert kept == files
    assert reason == f"{INDEX} unreadable (FileNotFoundError)"
    (tmp_path / INDEX).write_text("{not json")
    assert own_shards(str(tmp_path), files, NEXTN) == (
        files,
        f"{INDEX} unreadable (JSONDecodeError)",
    )


def test_an_index_that_does_not_place_the_layer_leaves_the_list_whole(
    folder: Path, tmp_path: Path
) -> None:
    files = shard_files(folder)
    assert own_shards(str(folder), files, "model.layers.99") == (
        files,
        f"{INDEX} places no tensor named model.layers.99*",
    )
    mapping = weight_map(folder)
    moved = {
        name: "elsewhere.safetensors" if name.startswith(NEXTN) else shard
        for name, shard in mapping.items()
    }
    (tmp_path / INDEX).write_text(json.dumps({"weight_map": moved}))
    kept, reason = own_shards(str(tmp_path), files, NEXTN)
    assert kept == files
    assert reason == f"{INDEX} names shards of {NEXTN}* that are not among the files"


@dataclasses.dataclass(frozen=True)
class ResolvedSourceDouble:
    source: Any
    hf_folder: str
    weight_files: tuple[str, ...]
    use_safetensors: bool


class LoaderDouble:
    """SGLang 0.5.23's DefaultModelLoader as the patch meets it (never seen by a user): its
    `_prepare_weights` lists the folder's shards, its iterator records the files it gets."""

    ResolvedSource = ResolvedSourceDouble
    read: list[tuple[str, ...]] = []

    def _prepare_weights(self, path: str, *args: Any) -> tuple[str, list[str], bool]:
        return path, shard_files(Path(path)), True

    def _get_weights_iterator(self, source: Any, *, resolved_source: Any = None) -> Iterator[str]:
        if resolved_source is None:
            folder, files, safetensors = self._prepare_weights(source.model_or_path)
            resolved_source = ResolvedSourceDouble(source, folder, tuple(files), safetensors)
        self.read.append(resolved_source.weight_files)
        return iter(resolved_source.weight_files)


def source(folder: Path, architecture: str, *, draft: bool) -> types.SimpleNamespace:
    hf_config = types.SimpleNamespace(architectures=[architecture], num_hidden_layers=6)
    config = types.SimpleNamespace(is_draft_model=draft, hf_config=hf_config)
    return types.SimpleNamespace(
        model_or_path=str(folder),
        revision=None,
        fall_back_to_pt=True,
        allow_patterns_overrides=None,
        model_config=config,
    )


def test_installed_only_the_bailing_nextn_draft_s_list_is_cut(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loader = types.ModuleType("sglang.srt.model_loader.loader")
    bailing = types.ModuleType("sglang.srt.models.bailing_moe_v3")

    class Loader(LoaderDouble):
        read: list[tuple[str, ...]] = []

    loader.DefaultModelLoader = Loader  # type: ignore[attr-defined]
    bailing.resolve_nextn_layer_id = lambda config: config.num_hidden_layers  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, loader.__name__, loader)
    monkeypatch.setitem(sys.modules, bailing.__name__, bailing)
    draft_shards.install()

    everything = tuple(shard_files(folder))
    kept, _ = own_shards(str(folder), everything, NEXTN)
    Loader()._get_weights_iterator(source(folder, "BailingMoeV3ForCausalLM", draft=False))
    Loader()._get_weights_iterator(source(folder, "BailingMoeForCausalLMNextN", draft=True))
    Loader()._get_weights_iterator(source(folder, "DSparkDraft", draft=True))
    assert Loader.read == [everything, tuple(kept), everything]
