"""The weight load's progress: the scheduler's records, the figures read from them, and the
line the start screen shows; a bad, absent or partial record shows no figure."""

from __future__ import annotations

import dataclasses
import json
import struct
import sys
import types
from pathlib import Path

import pytest

from app.backend.engine.boot.boot_log import describe
from app.backend.engine.boot.load_progress import (
    LoadProgress,
    progress_line,
    progress_stage,
    read_progress,
    write_progress,
)
from app.backend.engine.patches import load_watch
from app.backend.engine.patches.load_watch import LoadWatch, counted, tensor_bytes
from tests.support.clock import FakeClock

GB = 10**9


class TensorDouble:
    """What a weight iterator yields, as far as the byte count reads it (never seen by a user)."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes

    def numel(self) -> int:
        return self.nbytes // 2

    def element_size(self) -> int:
        return 2


def reading(bytes_read: int, total: int, read_s: float) -> LoadProgress:
    return LoadProgress("read", bytes_read, total, read_s, passes=1, seconds={"read": read_s})


def test_the_rate_is_bytes_over_seconds_read_and_time_left_follows_from_it() -> None:
    progress = reading(int(12.4 * GB), 66 * GB, 5.9)
    assert progress.rate == pytest.approx(12.4 * GB / 5.9)
    assert progress.seconds_left == pytest.approx((66 - 12.4) * GB / (12.4 * GB / 5.9))
    line = "Reading weights  12.4 of 66.0 GB  2.1 GB/s  about 26 s left"
    assert progress_line(progress) == line


def test_the_draft_s_reading_pass_is_named_as_its_own() -> None:
    second = dataclasses.replace(reading(int(1.2 * GB), 66 * GB, 1.0), passes=2)
    line = "Reading the draft's weights  1.2 of 66.0 GB  1.2 GB/s  about 54 s left"
    assert progress_line(second) == line


@pytest.mark.parametrize(
    ("progress", "line"),
    [
        (reading(0, 66 * GB, 3.0), "Reading weights  0.0 of 66.0 GB"),  # nothing read yet
        (reading(GB, 66 * GB, 0.1), "Reading weights  1.0 of 66.0 GB"),  # too soon to say
        # a boot's first sample: the first small tensors, read while the threads start
        (reading(72_000, 66 * GB, 0.5), "Reading weights  0.0 of 66.0 GB"),
        (reading(3 * GB, 0, 2.0), "Reading weights  3.0 GB  1.5 GB/s"),  # no total: no time
        (LoadProgress("repack", 66 * GB, 66 * GB, 30.0), "Repacking the MoE weights for Humming"),
    ],
)
def test_a_figure_the_record_cannot_support_is_left_out(progress: LoadProgress, line: str) -> None:
    assert progress_line(progress) == line


def test_a_record_round_trips_through_its_file(tmp_path: Path) -> None:
    path = tmp_path / "load-progress.json"
    progress = reading(5 * GB, 66 * GB, 2.5)
    write_progress(path, progress)
    assert read_progress(path) == progress
    assert [p.name for p in tmp_path.iterdir()] == ["load-progress.json"]  # no temporary left


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{"stage": "read", "bytes_read": 5',  # cut mid-write
        "not json",
        "[1, 2]",
        '{"stage": "dancing"}',
        '{"stage": "read", "bytes_read": -1}',
        '{"stage": "read", "bytes_read": "many"}',
        '{"stage": "read", "seconds": {"read": "long"}}',
        '{"stage": "read", "unknown_field": 1}',
    ],
)
def test_a_bad_or_partial_record_reads_as_none(tmp_path: Path, text: str) -> None:
    path = tmp_path / "load-progress.json"
    path.write_text(text)
    assert read_progress(path) is None


def test_no_record_shows_nothing_and_setup_leaves_the_log_its_line(tmp_path: Path) -> None:
    assert read_progress(tmp_path / "absent.json") is None
    assert progress_stage("Loading", None, 1.0) is None
    assert progress_stage("Loading", LoadProgress("setup", passes=1), 1.0) is None


def test_the_stage_carries_the_bytes_only_while_they_are_read() -> None:
    shown = progress_stage("Loading", reading(5 * GB, 66 * GB, 2.5), 40.0)
    assert shown is not None
    assert (shown.bytes_done, shown.bytes_total, shown.elapsed_s) == (5 * GB, 66 * GB, 40.0)
    graphs = progress_stage("Loading", LoadProgress("graphs", 66 * GB, 66 * GB, 30.0), 90.0)
    assert graphs is not None and graphs.bytes_total is None
    assert graphs.detail == "Capturing CUDA graphs"


def test_the_start_screen_shows_a_progress_line_as_it_is() -> None:
    line = progress_line(LoadProgress("repack"))
    assert describe(line) == line  # not SGLang's "Preparing the Humming MoE kernels"


def test_the_watch_times_each_stage_and_counts_what_the_iterator_yields(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "load-progress.json"
    watch = LoadWatch(path, clock)
    clock.advance(4.0)  # the model's init

    def weights(files: list[str]):  # SGLang's iterator, one tensor a second
        for n in range(3):
            clock.advance(1.0)
            yield f"w{n}", TensorDouble(GB)

    seen = list(counted(watch, weights)([]))
    assert [name for name, _ in seen] == ["w0", "w1", "w2"]
    clock.advance(2.0)
    with watch.span("repack"):
        clock.advance(5.0)
    clock.advance(1.0)
    watch.switch("setup")
    progress = read_progress(path)
    assert progress is not None
    assert progress.seconds == {"setup": 4.0, "read": 3.0, "process": 3.0, "repack": 5.0}
    assert (progress.bytes_read, progress.bytes_all, progress.passes) == (3 * GB, 3 * GB, 1)
    assert progress.reader == "weights"


def test_the_watch_writes_at_most_four_times_a_second(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "load-progress.json"
    watch = LoadWatch(path, clock)
    watch.begin_pass("weights", 10 * GB)
    for _ in range(10):
        clock.advance(1 / 16)
        watch.add(GB // 10)
    progress = read_progress(path)
    assert progress is not None
    assert progress.bytes_read == 8 * GB // 10  # written at 0.25 and 0.5 s, not since
    clock.advance(0.25)
    watch.add(0)
    assert (progress := read_progress(path)) is not None and progress.bytes_read == GB


def safetensors_file(path: Path, tensors: dict[str, int]) -> None:
    """A safetensors file of uint8 tensors of the given sizes (its real format, by hand)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, size in tensors.items():
        header[name] = {"dtype": "U8", "shape": [size], "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(offset))


def test_the_total_is_the_tensor_bytes_the_shards_headers_name(tmp_path: Path) -> None:
    safetensors_file(tmp_path / "a.safetensors", {"x": 100, "y": 28})
    safetensors_file(tmp_path / "b.safetensors", {"z": 1000})
    files = [str(tmp_path / "a.safetensors"), str(tmp_path / "b.safetensors")]
    assert tensor_bytes(files) == 1128
    (tmp_path / "c.safetensors").write_bytes(b"\x05")  # no header: the total is unknown
    assert tensor_bytes([*files, str(tmp_path / "c.safetensors")]) == 0


class SGLangDouble:
    """The few SGLang 0.5.23 names the watch patches, as plain modules (never seen by a user):
    the loader's iterators and its post-load step, Humming's repack and the graph capture."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
        self.clock = clock
        modules = {
            name: types.ModuleType(name)
            for name in (
                "sglang",
                "sglang.srt",
                "sglang.srt.model_loader",
                "sglang.srt.model_loader.loader",
                "sglang.srt.model_executor",
                "sglang.srt.model_executor.model_runner",
                "sglang.srt.layers",
                "sglang.srt.layers.quantization",
                "sglang.srt.layers.quantization.mxfp4_humming_moe",
            )
        }
        for name, module in modules.items():
            monkeypatch.setitem(sys.modules, name, module)
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(modules[parent], child, module)
        self.loader = modules["sglang.srt.model_loader.loader"]
        self.runner = modules["sglang.srt.model_executor.model_runner"]
        tick = clock.advance

        def buffered_multi_thread_safetensors_weights_iterator(files, max_workers):  # type: ignore[no-untyped-def]
            for n in range(4):
                tick(0.5)
                yield f"w{n}", TensorDouble(GB)

        class Mxfp4HummingMoEMethod:
            def process_weights_after_loading(self, layer: object) -> None:
                tick(3.0)

        class DefaultModelLoader:
            @staticmethod
            def load_weights_and_postprocess(model, weights, target_device):  # type: ignore[no-untyped-def]
                for _ in weights:
                    pass
                tick(1.0)  # SGLang's own processing
                Mxfp4HummingMoEMethod().process_weights_after_loading(model)

            def load_model(self) -> None:  # as SGLang calls both, by their module names
                iterator = self.loader.buffered_multi_thread_safetensors_weights_iterator
                self.load_weights_and_postprocess(None, iterator([], max_workers=8), "cuda")

        DefaultModelLoader.loader = self.loader  # type: ignore[attr-defined]
        self.loader.buffered_multi_thread_safetensors_weights_iterator = (
            buffered_multi_thread_safetensors_weights_iterator
        )
        self.loader.DefaultModelLoader = DefaultModelLoader
        modules[
            "sglang.srt.layers.quantization.mxfp4_humming_moe"
        ].Mxfp4HummingMoEMethod = Mxfp4HummingMoEMethod
        self.runner.capture_cuda_graphs = lambda **kwargs: tick(2.0)


def test_installed_in_sglang_s_names_the_watch_sees_every_stage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock()
    sglang = SGLangDouble(monkeypatch, clock)
    monkeypatch.setattr(load_watch.time, "monotonic", clock)
    path = tmp_path / "load-progress.json"
    load_watch.install(str(path), fp8_head=True)  # the FP8 head's class is absent: not timed
    clock.advance(5.0)
    sglang.loader.DefaultModelLoader().load_model()
    clock.advance(1.0)
    sglang.runner.capture_cuda_graphs(model_runner=None)
    progress = read_progress(path)
    assert progress is not None
    assert progress.seconds == {
        "setup": 6.0,
        "read": 2.0,
        "process": 1.0,
        "repack": 3.0,
        "graphs": 2.0,
    }
    assert (progress.stage, progress.bytes_all, progress.bytes_total) == ("setup", 4 * GB, 0)
    assert progress.reader == "buffered_multi_thread_safetensors_weights_iterator"
