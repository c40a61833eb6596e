"""Build every run-time-compiled kernel before the real weights load, once per setup.

The same stack boots on a small dummy model with the checkpoint's own config
(`load_format="dummy"`), runs the warm-up replies (greedy, then sampled as the chat samples)
and shuts down. Loading, graph capture and those replies reach every JIT build the real
start reaches: FlashInfer's sampling and norm modules (and the `baseline` profile's MoE
module), SGLang's JIT quantization, block-FP8 GEMM and tree kernels, Humming's kernels for
the checkpoint's shapes, Triton's KDA kernels. Builds run with bounded parallelism (each
nvcc job takes about JOB_BYTES), and a marker keyed by (config, profile, GPU, versions)
in SGLang's cache dir records success: clearing that cache also forgets the marker.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from app import __version__
from app.backend.engine import kernel_cache
from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import WARMUP_STAGE
from app.backend.firststart.preflight import GIB
from app.backend.protocol import ChatBackend, LoadStage
from app.core.errors import BackendError, ExportError
from app.files import write_atomic

PREPARE_STAGE = "Compiling kernels (first start)"
CACHE_STAGE = "Checking kernel caches"
JOB_BYTES = 10 * GIB
"""Memory one nvcc job may take (the Spark recipe builds FlashInfer's MoE at ~10 GB a job)."""
HOST_RESERVE = 8 * GIB
"""Memory the engine's own processes hold while the dummy model runs."""
HUMMING_POOL = 16
"""humming-kernels 0.1.12 compiles in a pool of 16 threads, or serially: nothing between."""
PREPARE_MEM_FRACTION = 0.3
"""The dummy model's share of GPU memory: on unified memory the rest is left to compilers."""
PREPARE_WATCHDOG_S = 3600
"""SGLang's scheduler watchdog kills a forward batch that takes longer than its timeout
(300 s by default); a JIT build inside a warm-up request on few jobs can take longer. An hour
still ends a real hang."""
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".index.json")
VERSIONED = ("sglang", "sglang-kernel", "flashinfer-python", "humming-kernels", "torch")
BUILDING = re.compile(r"Building JIT module ([\w.-]+)")
DRAFT_LAYER_KEYS = ("target_layer_ids", "dspark_target_layer_ids")
"""Where a DSpark draft's config names the target layers whose hidden states it reads..."""
DRAFT_SECTIONS = ("dflash_config", "dspark_config")
"""...at its top level or in these sections (SGLang's `dspark_config.py`)."""


def dummy_config(config: Mapping[str, Any], min_layers: int = 0) -> dict[str, Any]:
    """The checkpoint's config cut to the fewest layers that keep every kind of layer, and
    at least `min_layers` (the target layers a DSpark draft reads).

    Layers below `first_k_dense_replace` are dense, the rest MoE. `layer_group_size` as a
    list marks each layer KDA (1) or MLA (0) (SGLang's bailing_hybrid config): the dense
    layers and the MoE layers but the last are KDA, the last MoE layer is MLA. The NEXTN
    layer stays.
    """
    dense = int(config.get("first_k_dense_replace", 0))
    layers = max(dense + 2, min_layers)
    cut = {**config, "num_hidden_layers": layers}
    if "layer_group_size" in config:
        cut["layer_group_size"] = [1] * (layers - 1) + [0]
    return cut


def _draft_sections(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The draft config and the nested sections SGLang reads DSpark's fields from."""
    return [config, *(config[k] for k in DRAFT_SECTIONS if isinstance(config.get(k), dict))]


def draft_target_layers(config: dict[str, Any]) -> int:
    """How many distinct target layers a DSpark draft reads (0: SGLang picks them)."""
    sections = _draft_sections(config)
    return len({i for s in sections for key in DRAFT_LAYER_KEYS for i in s.get(key) or ()})


def dummy_draft_config(config: Mapping[str, Any], target_layers: int) -> dict[str, Any]:
    """A DSpark draft's config over the cut target of `target_layers` layers: the target
    layers it reads mapped, in order, onto the cut target's first layers."""
    cut: dict[str, Any] = json.loads(json.dumps(config))
    for section in _draft_sections(cut):
        for key in DRAFT_LAYER_KEYS:
            if ids := section.get(key):
                rank = {layer: n for n, layer in enumerate(sorted(set(ids)))}
                section[key] = [rank[layer] for layer in ids]
        if "num_target_layers" in section:
            section["num_target_layers"] = target_layers
    return cut


def _copy_without_weights(source: Path, dest: Path, config: Mapping[str, Any]) -> Path:
    """`dest` holding `source`'s files but its weights, and `config` as its config.json."""
    dest.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.is_file() and not item.name.endswith(WEIGHT_SUFFIXES):
            shutil.copy2(item, dest / item.name)
    (dest / "config.json").write_text(json.dumps(config, indent=1))
    return dest


def read_config(checkpoint: Path) -> dict[str, Any]:
    """A checkpoint's config.json."""
    config: dict[str, Any] = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    return config


def write_dummy_model(checkpoint: Path, dest: Path, min_layers: int = 0) -> Path:
    """`dest` holding `checkpoint`'s config (cut) and tokenizer files, no weights."""
    return _copy_without_weights(
        checkpoint, dest, dummy_config(read_config(checkpoint), min_layers)
    )


def write_dummy_pair(checkpoint: Path, draft: Path | None, dest: Path) -> tuple[Path, Path | None]:
    """The cut target under `dest`, and beside it the draft (if any) reading its layers."""
    if draft is None:
        return write_dummy_model(checkpoint, dest / "model"), None
    draft_config = read_config(draft)
    model = write_dummy_model(checkpoint, dest / "model", draft_target_layers(draft_config))
    layers = int(read_config(model)["num_hidden_layers"])
    return model, _copy_without_weights(
        draft, dest / "draft", dummy_draft_config(draft_config, layers)
    )


def versions() -> dict[str, str]:
    """The installed versions a kernel cache depends on, and ling-chat's."""
    found = {"ling-chat": __version__}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "none"
    return found


def prepare_key(
    config_text: str, setup: Mapping[str, Any], gpu: str, installed: Mapping[str, str]
) -> str:
    """The marker's name: a hash of what a kernel cache depends on."""
    checkpoint = hashlib.sha256(config_text.encode()).hexdigest()
    blob = {"config": checkpoint, "setup": setup, "gpu": gpu, "versions": dict(installed)}
    return hashlib.sha256(json.dumps(blob, sort_keys=True, default=str).encode()).hexdigest()[:20]


def marker_dir() -> Path:
    """Under SGLang's cache dir, where FlashInfer's and Triton's builds go too."""
    cache = os.environ.get("SGLANG_CACHE_DIR") or "~/.cache/sglang"
    return Path(cache).expanduser() / "ling-chat-prepared"


def heal_kernel_caches(env: Mapping[str, str] = os.environ) -> list[str]:
    """Remove the kernel-cache entries that cannot be valid (app/backend/engine/kernel_cache.py),
    and with any removed forget every prepare's marker, so that the prepare builds them
    again; a line per removal."""
    removed = kernel_cache.heal(kernel_cache.caches(env))
    if removed:
        for marker in marker_dir().glob("*.json"):
            marker.unlink(missing_ok=True)
    return [entry.line() for entry in removed]


def build_jobs(mem_available: int, cpus: int, gpu_pool_bytes: int) -> int:
    """Parallel compile jobs that fit in memory: at least 1, at most one per CPU.

    `gpu_pool_bytes` is what the dummy engine takes out of host memory (unified GPUs).
    """
    free = mem_available - gpu_pool_bytes - HOST_RESERVE
    return max(1, min(cpus, free // JOB_BYTES))


def build_env(jobs: int) -> dict[str, str]:
    """The variables each builder reads for its parallelism."""
    return {
        "MAX_JOBS": str(jobs),  # ninja -j: FlashInfer, SGLang's JIT, torch cpp_extension
        "FLASHINFER_JIT_PREBUILD_MAX_JOBS": str(jobs),
        "FLASHINFER_NVCC_THREADS": "1",
        "HUMMING_DISABLE_PARALLEL_BUILD": "0" if jobs >= HUMMING_POOL else "1",
    }


def compiling(stage: LoadStage) -> str:
    """What the dummy model is doing: the module FlashInfer builds (its log then goes quiet
    until the build ends), else the dummy's own stage (Humming, SGLang's JIT and Triton
    build without a log line)."""
    if match := BUILDING.search(stage.detail):
        return f"FlashInfer: {match.group(1)}"
    return stage.name


@dataclasses.dataclass(frozen=True, slots=True)
class PrepareSpec:
    """One prepare: the real engine's config, the GPU it runs on, the build parallelism."""

    config: EngineConfig
    checkpoint: Path
    """A local directory holding the checkpoint's config.json and tokenizer."""
    draft: Path | None
    """The same for the profile's DSpark draft; None without one."""
    gpu: str
    """e.g. `NVIDIA GB10 sm_121`."""
    env: Mapping[str, str]

    def marker(self) -> Path:
        """The marker file of this checkpoint config, profile, overrides, GPU and versions."""
        text = (self.checkpoint / "config.json").read_text(encoding="utf-8")
        setup = {"profile": self.config.profile, "overrides": self.config.overrides}
        return marker_dir() / f"{prepare_key(text, setup, self.gpu, versions())}.json"

    def dummy_engine(self, model_dir: Path, draft_dir: Path | None = None) -> EngineConfig:
        """The same engine on the dummy model (and draft), with a watchdog that lets builds
        finish."""
        draft = {} if draft_dir is None else {"speculative_draft_model_path": str(draft_dir)}
        return dataclasses.replace(
            self.config,
            model_path=str(model_dir),
            mem_fraction=min(self.config.mem_fraction, PREPARE_MEM_FRACTION),
            overrides={
                **self.config.overrides,
                **draft,
                "load_format": "dummy",
                "watchdog_timeout": PREPARE_WATCHDOG_S,
            },
        )


async def prepare(
    spec: PrepareSpec, make_backend: Callable[[EngineConfig], ChatBackend]
) -> AsyncIterator[LoadStage]:
    """Boot the dummy model once unless the marker says it was done; yields PREPARE_STAGE.

    Raises:
        BackendError: the dummy model did not start or its warm-up did not run.
    """
    marker = spec.marker()
    if marker.is_file():
        return
    t0 = time.perf_counter()
    for name, value in spec.env.items():
        os.environ.setdefault(name, value)  # a variable the user set wins
    jobs = f"{os.environ['MAX_JOBS']} compile jobs"
    doing = "booting the dummy model"
    yield LoadStage(PREPARE_STAGE, False, 0.0, f"{doing} · {jobs}")
    with tempfile.TemporaryDirectory(prefix="ling-chat-prepare-") as tmp:
        model, draft = write_dummy_pair(spec.checkpoint, spec.draft, Path(tmp))
        backend = make_backend(spec.dummy_engine(model, draft))
        warmed = False
        try:
            async for stage in backend.start():
                doing = compiling(stage)
                warmed = warmed or (stage.done and stage.name == WARMUP_STAGE)
                yield LoadStage(PREPARE_STAGE, False, time.perf_counter() - t0, f"{doing} · {jobs}")
            refused = None if warmed else next(iter((await backend.proof()).failed), None)
        finally:
            await backend.shutdown()
    if not warmed:
        why = "" if refused is None else f": {refused.title}: {refused.evidence}"
        fix = f" ({refused.fix})" if refused is not None and refused.fix else ""
        raise BackendError(f"preparing the kernels stopped before the warm-up ran{why}{fix}")
    took = time.perf_counter() - t0
    record = {"gpu": spec.gpu, "profile": spec.config.profile, "versions": versions()}
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(marker, [json.dumps({**record, "seconds": round(took, 1)})], replace=True)
    except (OSError, ExportError) as exc:
        raise BackendError(f"kernels built, but {marker} cannot be written: {exc}") from exc
    yield LoadStage(PREPARE_STAGE, True, time.perf_counter() - t0, "cached for later starts")
