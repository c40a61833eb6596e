"""The weight load watched from inside the scheduler: bytes read and seconds by stage.

Every weight iterator SGLang 0.5.23's loader can call for safetensors (the default
multi-threaded one, the single-threaded one, fastsafetensors, InstantTensor) is wrapped in
the loader's namespace to count the bytes of the tensors it yields. Reading ends when an
iterator is exhausted; SGLang's weight processing runs until the loader returns, Humming's
repack inside it; the FP8 head and every CUDA-graph capture are timed where they run.
Each change is written to the progress file (app/backend/engine/boot/load_progress.py).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app.backend.engine.boot.load_progress import WRITES_PER_S, LoadProgress, write_progress
from app.core.errors import ExportError

ITERATORS = (
    "buffered_multi_thread_safetensors_weights_iterator",
    "safetensors_weights_iterator",
    "fastsafetensors_weights_iterator",
    "instanttensor_weights_iterator",
)
"""The safetensors iterators `DefaultModelLoader._get_weights_iterator` calls."""
_Q = "sglang.srt.layers.quantization"
_SPEC = "sglang.srt.speculative"
TIMED = (
    (f"{_Q}.mxfp4_humming_moe.Mxfp4HummingMoEMethod", "process_weights_after_loading", "repack"),
    (f"{_Q}.humming.HummingMoEMethod", "process_weights_after_loading", "repack"),
    (
        "sglang.srt.models.bailing_moe_v3.BailingMoeV3ForCausalLM",
        "precompile_kernels_after_loading",
        "fp8_head",
    ),
    # The speculative workers capture the draft's graphs through a method of their own.
    (f"{_SPEC}.eagle_worker_v2.EagleDraftWorker", "_capture_cuda_graphs", "graphs"),
    (
        f"{_SPEC}.multi_layer_eagle_worker_v2.MultiLayerEagleDraftWorker",
        "_capture_cuda_graphs",
        "graphs",
    ),
    (f"{_SPEC}.frozen_kv_mtp_worker_v2.FrozenKVMTPDraftWorker", "_capture_cuda_graphs", "graphs"),
)
"""(class, method, stage): the calls timed as a stage of the load."""


class LoadWatch:
    """The load's current stage, seconds by stage and bytes read, written to a file."""

    def __init__(self, path: Path, clock: Callable[[], float] | None = None) -> None:
        self.path = path
        self._clock = clock or time.monotonic
        self.stage = "setup"
        self._since = self._clock()
        self._seconds: dict[str, float] = {}
        self._pass_began = 0.0
        self._read = self._total = self._all = self._passes = 0
        self._reader = ""
        self._written = float("-inf")

    def switch(self, stage: str) -> None:
        """The load enters `stage`."""
        now = self._clock()
        self._seconds[self.stage] = self._seconds.get(self.stage, 0.0) + now - self._since
        self.stage, self._since = stage, now
        self.write(force=True)

    @contextlib.contextmanager
    def span(self, stage: str) -> Iterator[None]:
        """`stage` while the block runs, then back to the stage before it."""
        before = self.stage
        self.switch(stage)
        try:
            yield
        finally:
            self.switch(before)

    def begin_pass(self, reader: str, total: int) -> None:
        """Weight iterator `reader` begins reading files holding `total` tensor bytes."""
        self._passes += 1
        self._reader = reader
        self._read, self._total = 0, total
        self._pass_began = self._clock()
        self.switch("read")

    def add(self, nbytes: int) -> None:
        self._read += nbytes
        self._all += nbytes
        self.write()

    def snapshot(self) -> LoadProgress:
        now = self._clock()
        seconds = dict(self._seconds)
        seconds[self.stage] = seconds.get(self.stage, 0.0) + now - self._since
        return LoadProgress(
            stage=self.stage,
            bytes_read=self._read,
            bytes_total=self._total,
            read_s=now - self._pass_began if self._passes else 0.0,
            passes=self._passes,
            seconds={name: round(s, 3) for name, s in seconds.items()},
            bytes_all=self._all,
            reader=self._reader,
        )

    def write(self, *, force: bool = False) -> None:
        """Write the snapshot, at most WRITES_PER_S times a second unless `force`d."""
        now = self._clock()
        if not force and now - self._written < 1 / WRITES_PER_S:
            return
        self._written = now
        with contextlib.suppress(ExportError):  # a full disk must not stop the load
            write_progress(self.path, self.snapshot())


def tensor_bytes(files: list[str]) -> int:
    """The tensor bytes the safetensors `files` hold, from their headers; 0 if unreadable."""
    total = 0
    try:
        for name in files:
            with open(name, "rb") as file:
                (size,) = struct.unpack("<Q", file.read(8))
                header = json.loads(file.read(size))
            total += sum(
                end - begin
                for key, entry in header.items()
                if key != "__metadata__"
                for begin, end in [entry["data_offsets"]]
            )
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return 0
    return total


def counted(watch: LoadWatch, iterator: Callable[..., Iterator[tuple[str, Any]]]) -> Any:
    """`iterator` with the bytes of what it yields counted, reading ending when it ends."""

    @functools.wraps(iterator)
    def wrapper(files: list[str], *args: Any, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        watch.begin_pass(iterator.__name__, tensor_bytes(list(files)))
        for name, tensor in iterator(files, *args, **kwargs):
            watch.add(tensor.numel() * tensor.element_size())
            yield name, tensor
        watch.switch("process")

    return wrapper


def timed(watch: LoadWatch, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, its calls counted as `stage`."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with watch.span(stage):
            return function(*args, **kwargs)

    return wrapper


def install(path: str, *, fp8_head: bool) -> LoadWatch:
    """Watch the load in this (scheduler) process, writing to `path` (`fp8_head`: the FP8
    head's patch is installed; this comes after it, so that its time counts as the head's)."""
    from sglang.srt.model_executor import model_runner
    from sglang.srt.model_loader import loader

    watch = LoadWatch(Path(path))
    for name in ITERATORS:
        if hasattr(loader, name):
            setattr(loader, name, counted(watch, getattr(loader, name)))
    stock_load = loader.DefaultModelLoader.load_weights_and_postprocess

    def load_weights_and_postprocess(*args: Any, **kwargs: Any) -> Any:
        try:
            return stock_load(*args, **kwargs)
        finally:
            watch.switch("setup")

    loader.DefaultModelLoader.load_weights_and_postprocess = staticmethod(
        load_weights_and_postprocess
    )
    model_runner.capture_cuda_graphs = timed(watch, "graphs", model_runner.capture_cuda_graphs)
    for target, method, stage in TIMED:
        if stage == "fp8_head" and not fp8_head:
            continue
        module_name, _, class_name = target.rpartition(".")
        with contextlib.suppress(ImportError, AttributeError):  # a stage not timed, no more
            cls = getattr(importlib.import_module(module_name), class_name)
            setattr(cls, method, timed(watch, stage, getattr(cls, method)))
    return watch
