"""The prepare: a dummy model with every kind of layer, bounded builds, a marker, a watchdog."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.config import EngineConfig
from app.backend.firststart import prepare as prepare_mod
from app.backend.firststart.first_start import PreparedBackend
from app.backend.firststart.preflight import GIB
from app.backend.firststart.prepare import (
    PREPARE_STAGE,
    PrepareSpec,
    build_env,
    build_jobs,
    dummy_config,
    dummy_draft_config,
    prepare,
    write_dummy_model,
)
from app.backend.protocol import BackendInfo, LoadStage, ReplyEvent
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.errors import BackendError
from app.core.proof_report import ProofLine, ProofReport, Verdict


def layer_plan(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(attention, ffn) per layer, by SGLang 0.5.23's rules (bailing_hybrid.py,
    bailing_moe_v3.py `is_linear_layer`, `first_k_dense_replace`)."""
    group = config["layer_group_size"]
    plan = []
    for layer in range(config["num_hidden_layers"]):
        kda = group[layer] == 1 if isinstance(group, list) else (layer + 1) % group != 0
        moe = layer >= config["first_k_dense_replace"]
        plan.append(("KDA" if kda else "MLA", "MoE" if moe else "dense"))
    return plan


@pytest.mark.parametrize("dense", [0, 1, 2])
def test_the_dummy_model_keeps_every_kind_of_layer(dense: int):
    config = {**LING_3_FLASH_CONFIG, "first_k_dense_replace": dense}
    cut = dummy_config(config)
    plan = layer_plan(cut)
    assert len(cut["layer_group_size"]) == cut["num_hidden_layers"] == dense + 2
    assert {"KDA", "MLA"} <= {attn for attn, _ in plan}
    assert ("KDA", "MoE") in plan and ("MLA", "MoE") in plan
    assert plan.count(("KDA", "dense")) == dense
    assert cut["num_nextn_predict_layers"] == 1
    assert {k: v for k, v in cut.items() if k not in ("num_hidden_layers", "layer_group_size")} == {
        k: v for k, v in config.items() if k not in ("num_hidden_layers", "layer_group_size")
    }


def checkpoint(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(LING_3_FLASH_CONFIG))
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (root / name).write_text(name)
    for name in ("model-00001-of-00024.safetensors", "model.safetensors.index.json"):
        (root / name).write_text("weights")
    return root


def test_the_dummy_model_has_the_tokenizer_and_no_weights(tmp_path: Path):
    dummy = write_dummy_model(checkpoint(tmp_path / "ckpt"), tmp_path / "dummy")
    assert sorted(p.name for p in dummy.iterdir()) == [
        "chat_template.jinja",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    assert json.loads((dummy / "config.json").read_text())["num_hidden_layers"] == 4


# DSpark drafts name the target layers they read at the top level, under a nested section
# (the published drafts' `dflash_config`), or with a `dspark_` prefix (SGLang 0.5.23).
DRAFT_LAYOUTS = {
    "top level": {"target_layer_ids": [1, 21, 40, 41], "num_target_layers": 42},
    "dflash_config": {"dflash_config": {"target_layer_ids": [41, 1, 21], "num_target_layers": 42}},
    "prefixed": {"dspark_target_layer_ids": [5, 9]},
}


@pytest.mark.parametrize("layout", DRAFT_LAYOUTS)
def test_the_dummy_draft_reads_the_cut_targets_layers_in_order(layout: str):
    draft = {"architectures": ["LingDSparkModel"], **DRAFT_LAYOUTS[layout]}
    cut = dummy_draft_config(draft, 4)
    expected = {
        "top level": {"target_layer_ids": [0, 1, 2, 3], "num_target_layers": 4},
        "dflash_config": {"dflash_config": {"target_layer_ids": [2, 0, 1], "num_target_layers": 4}},
        "prefixed": {"dspark_target_layer_ids": [0, 1]},
    }[layout]
    assert cut == {"architectures": ["LingDSparkModel"], **expected}
    assert draft == {"architectures": ["LingDSparkModel"], **DRAFT_LAYOUTS[layout]}  # a copy


async def test_a_dspark_prepare_boots_a_draft_that_reads_layers_the_cut_target_has(
    spec: PrepareSpec, tmp_path: Path
):
    draft = tmp_path / "draft"
    draft.mkdir()
    # A draft reading five target layers: more than the cut target's four.
    config = {"target_layer_ids": [1, 10, 20, 40, 41], "num_target_layers": 42}
    (draft / "config.json").write_text(json.dumps(config))
    (draft / "model.safetensors").write_text("weights")
    dspark = dataclasses.replace(
        spec, config=dataclasses.replace(spec.config, profile="dspark"), draft=draft
    )
    await stages(dspark)
    (seen,) = DummyEngineDouble.configs
    assert seen["model"]["num_hidden_layers"] == 5
    assert seen["draft"] == {"target_layer_ids": [0, 1, 2, 3, 4], "num_target_layers": 5}
    (started,) = DummyEngineDouble.started
    assert not (
        Path(started.overrides["speculative_draft_model_path"]) / "model.safetensors"
    ).exists()


def test_compile_jobs_fit_free_memory_at_ten_gib_each():
    # A Spark: 115 GiB available, the dummy engine's 0.3 x 119.6 GiB, 8 GiB for processes.
    assert build_jobs(115 * GIB, 20, int(0.3 * 119.6 * GIB)) == 7
    assert build_jobs(12 * GIB, 20, 0) == 1  # never zero
    assert build_jobs(2000 * GIB, 16, 0) == 16  # never more than the CPUs
    assert build_env(7) == {
        "MAX_JOBS": "7",
        "FLASHINFER_JIT_PREBUILD_MAX_JOBS": "7",
        "FLASHINFER_NVCC_THREADS": "1",
        "HUMMING_DISABLE_PARALLEL_BUILD": "1",  # its pool is 16 threads or nothing
    }
    assert build_env(16)["HUMMING_DISABLE_PARALLEL_BUILD"] == "0"


class DummyEngineDouble:
    """Test double of the dummy model's EngineBackend: plays the stages a real start yields."""

    started: list[EngineConfig] = []
    configs: list[dict[str, Any]] = []
    """config.json of the model and the draft it was given, read while it runs."""

    def __init__(
        self, config: EngineConfig, *, fail: bool = False, refused: ProofLine | None = None
    ) -> None:
        self.config = config
        self.fail = fail
        self.refused = refused
        self.shut_down = False

    @property
    def info(self) -> BackendInfo:
        return BackendInfo("engine", self.config.model_path, "0.5.23", "stack", True)

    async def start(self) -> AsyncIterator[LoadStage]:
        DummyEngineDouble.started.append(self.config)
        model = Path(self.config.model_path) / "config.json"
        if model.is_file():  # a dummy model, not the hub id of the start after the prepare
            draft = self.config.overrides.get("speculative_draft_model_path")
            DummyEngineDouble.configs.append(
                {
                    "model": json.loads(model.read_text()),
                    "draft": json.loads((Path(draft) / "config.json").read_text())
                    if draft
                    else None,
                }
            )
        yield LoadStage("Loading weights", False, 1.0, "Building JIT module norm; this can take")
        yield LoadStage("Loading weights", False, 2.0, "capturing cuda graph bs=1")
        if self.fail:
            raise BackendError("SGLang failed to start (RuntimeError: nvcc died)")
        if self.refused:  # the engine's way: the load stage ends "refused", no warm-up
            yield LoadStage("Loading weights", True, 3.0, "refused")
            return
        yield LoadStage("Loading weights", True, 3.0)
        yield LoadStage("Warming up and measuring accept length", False, 3.0, "...")
        yield LoadStage("Warming up and measuring accept length", True, 9.0, "accept 1.00")

    async def proof(self) -> ProofReport:
        return ProofReport("stack", (self.refused,) if self.refused else ())

    def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        raise NotImplementedError

    async def stop_reply(self) -> None:
        pass

    async def shutdown(self) -> None:
        self.shut_down = True


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PrepareSpec:
    monkeypatch.setenv("SGLANG_CACHE_DIR", str(tmp_path / "cache"))
    for name in build_env(1):
        monkeypatch.delenv(name, raising=False)
    DummyEngineDouble.started = []
    DummyEngineDouble.configs = []
    return PrepareSpec(
        config=EngineConfig(model_path="inclusionAI/Ling-3.0-flash-fp4", mem_fraction=0.65),
        checkpoint=checkpoint(tmp_path / "ckpt"),
        draft=None,
        gpu="NVIDIA GB10 sm_121",
        env=build_env(3),
    )


async def stages(spec: PrepareSpec, **double: Any) -> list[LoadStage]:
    return [s async for s in prepare(spec, lambda c: DummyEngineDouble(c, **double))]


async def test_prepare_boots_the_dummy_model_once_then_the_marker_skips_it(spec: PrepareSpec):
    seen = await stages(spec)
    assert {s.name for s in seen} == {PREPARE_STAGE}
    assert seen[-1].done and not any(s.done for s in seen[:-1])
    assert seen[0].detail == "booting the dummy model · 3 compile jobs"
    details = [s.detail for s in seen]
    assert details[1:3] == ["FlashInfer: norm · 3 compile jobs", "Loading weights · 3 compile jobs"]
    (dummy,) = DummyEngineDouble.started
    assert dummy.overrides["load_format"] == "dummy"
    assert dummy.overrides["watchdog_timeout"] >= 3600  # SGLang's 300 s killed a JIT build
    assert dummy.mem_fraction == 0.3 and dummy.model_path != spec.config.model_path
    assert os.environ["MAX_JOBS"] == "3" and os.environ["HUMMING_DISABLE_PARALLEL_BUILD"] == "1"
    marker = json.loads(spec.marker().read_text())
    assert (marker["gpu"], marker["profile"]) == ("NVIDIA GB10 sm_121", "stack")
    assert await stages(spec) == []
    assert len(DummyEngineDouble.started) == 1


async def test_the_marker_is_keyed_by_profile_gpu_and_config(spec: PrepareSpec, tmp_path: Path):
    import dataclasses

    await stages(spec)
    other_profile = dataclasses.replace(spec, config=EngineConfig("m", profile="baseline"))
    other_gpu = dataclasses.replace(spec, gpu="NVIDIA H200 sm_90")
    ckpt = checkpoint(tmp_path / "other")
    (ckpt / "config.json").write_text(json.dumps({**LING_3_FLASH_CONFIG, "hidden_size": 4096}))
    other_config = dataclasses.replace(spec, checkpoint=ckpt)
    markers = {s.marker() for s in (spec, other_profile, other_gpu, other_config)}
    assert len(markers) == 4
    assert [s.marker().is_file() for s in (spec, other_profile, other_gpu)] == [
        True,
        False,
        False,
    ]


async def test_a_user_set_max_jobs_wins(spec: PrepareSpec, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MAX_JOBS", "1")
    await stages(spec)
    assert os.environ["MAX_JOBS"] == "1"


async def test_a_failed_prepare_writes_no_marker_and_stops_the_dummy_engine(spec: PrepareSpec):
    doubles: list[DummyEngineDouble] = []

    def make(config: EngineConfig) -> DummyEngineDouble:
        doubles.append(DummyEngineDouble(config, fail=True))
        return doubles[-1]

    with pytest.raises(BackendError, match="nvcc died"):
        async for _ in prepare(spec, make):
            pass
    assert doubles[0].shut_down and not spec.marker().exists()


async def test_a_refused_dummy_engine_names_the_proof_line_and_its_fix(spec: PrepareSpec):
    line = ProofLine("fp8_head", "FP8 LM head", Verdict.FAIL, "1.05x, under 1.2x", "use humming")
    with pytest.raises(BackendError) as caught:
        await stages(spec, refused=line)
    assert str(caught.value) == (
        "preparing the kernels stopped before the warm-up ran: "
        "FP8 LM head: 1.05x, under 1.2x (use humming)"
    )
    assert not spec.marker().exists()


async def test_the_real_start_follows_the_prepare_on_one_clock(spec: PrepareSpec):
    inner = DummyEngineDouble(spec.config)
    backend = PreparedBackend(inner, lambda: spec, DummyEngineDouble)
    seen = [s async for s in backend.start()]
    names = [s.name for s in seen]
    assert names.index(PREPARE_STAGE) == 0 and names[-1].startswith("Warming up")
    prepared_at = max(s.elapsed_s for s in seen if s.name == PREPARE_STAGE)
    assert all(s.elapsed_s >= prepared_at for s in seen if s.name != PREPARE_STAGE)
    assert len(DummyEngineDouble.started) == 2  # the dummy model, then the real one
    assert DummyEngineDouble.started[1] is spec.config


def test_the_module_stays_small():
    assert len(Path(prepare_mod.__file__).read_text().splitlines()) < 300


def test_settings_that_change_no_kernel_share_one_marker(tmp_path: Path):
    from app.backend.firststart.preflight import GpuInfo, Probes
    from app.launch import prepare_spec

    gpu = GpuInfo("NVIDIA H200", 90, 140 * GIB)
    probes = Probes(None, None, None, None, gpu, 128 * GIB, 100 * GIB, False, (), 500 * GIB)
    ckpt = str(checkpoint(tmp_path / "ckpt"))
    plain = prepare_spec(EngineConfig(ckpt), probes)
    dummy = prepare_spec(EngineConfig(ckpt, overrides={"load_format": "dummy", "port": 1}), probes)
    other = prepare_spec(EngineConfig(ckpt, overrides={"page_size": 16}), probes)
    assert plain.marker() == dummy.marker() != other.marker()
    assert dummy.config.overrides == {} and plain.gpu == "NVIDIA H200 sm_90"
