"""The weight load by stage, for each load format, page cache dropped and warm (GPU only).

Writes (once; reused when its marker is there) a real-layout checkpoint of LAYERS layers with
the real per-layer sizes (tests/gpu/checkpoint.py), reads its shards itself to measure the
disk (cache dropped) and the page cache, then boots the `stack` profile through the product's
EngineBackend once per RUN (FORMAT:cold or FORMAT:warm, in the order given; FORMAT:cold:all
has the NEXTN draft read every shard again, as SGLang does without ling-chat's draft_shards
patch, for the side-by-side row): seconds by stage from the scheduler's progress records,
GB/s, the proof, and the weight iterator that really ran (another one is a fallback). Each
row is appended to the JSON file as it comes, so a run cut short keeps the rows before; the
table covers every row in the file.

    python3 lab/scripts/gpu_load_bench.py OUT_DIR --checkpoint /root/ckpt12 --layers 12 \\
        --runs auto:cold,auto:warm,instanttensor:cold:all --json OUT/load-bench.json
    python3 lab/scripts/gpu_load_bench.py OUT_DIR --checkpoint-only   # the checkpoint alone
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.backend.engine.boot.boot_log import LOAD_STAGE  # noqa: E402
from app.backend.engine.config import EngineConfig  # noqa: E402
from app.backend.engine.engine import WARMUP_STAGE, EngineBackend  # noqa: E402
from app.backend.engine.patches.boundary import PLAN_ENV, PatchPlan  # noqa: E402
from app.backend.engine.patches.load_watch import tensor_bytes  # noqa: E402
from lab.research.load_bench import DiskRead, LoadBench, LoadRow, table  # noqa: E402

FORMATS: dict[str, dict[str, Any]] = {
    "auto": {"load_format": "auto"},
    "fastsafetensors": {
        "load_format": "fastsafetensors",
        "model_loader_extra_config": '{"enable_gds": false}',
    },
    "instanttensor": {"load_format": "instanttensor"},
    "auto-nommap": {"load_format": "auto", "weight_loader_disable_mmap": True},
    "auto-1thread": {
        "load_format": "auto",
        "model_loader_extra_config": '{"enable_multithread_load": false}',
    },
}
"""The SGLang 0.5.23 load formats that fit a single-GPU start, as server arguments; each
names its format, whatever ling-chat's default on the GPU is."""
MARKER = ".ling-chat-complete"
NOTES = re.compile(r"(?i)fall(?:ing)? ?back|nogds|gpudirect|cufile|\bgds\b")
BLOCK = 64 << 20


def shards(checkpoint: Path) -> list[Path]:
    return sorted(checkpoint.glob("*.safetensors"))


def ensure_checkpoint(checkpoint: Path, layers: int) -> None:
    """The checkpoint, written unless a complete one is there."""
    if (checkpoint / MARKER).exists():
        print(f"checkpoint: reusing {checkpoint}", flush=True)
        return
    from tests.gpu.checkpoint import write_checkpoint

    began = time.perf_counter()
    write_checkpoint(checkpoint, layers)
    os.sync()
    (checkpoint / MARKER).write_text(str(layers))
    print(f"checkpoint: wrote {checkpoint} in {time.perf_counter() - began:.0f} s", flush=True)


def drop_cache(files: list[Path]) -> str:
    """Evict the shards from the page cache; says how: `drop_caches` and `fadvise`, or
    `fadvise` alone (a container may deny the first)."""
    os.sync()  # dirty pages cannot be dropped
    how = "fadvise (drop_caches denied)"
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        how = "drop_caches and fadvise"
    except OSError:
        pass
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return how


def read_all(files: list[Path]) -> tuple[int, float]:
    """Read every shard sequentially: (bytes, seconds)."""
    buffer = bytearray(BLOCK)
    view = memoryview(buffer)
    total = 0
    began = time.perf_counter()
    for path in files:
        with open(path, "rb", buffering=0) as file:
            while n := file.readinto(view):
                total += n
    return total, time.perf_counter() - began


def measure_disk(files: list[Path]) -> DiskRead:
    dropped_by = drop_cache(files)
    size, seconds = read_all(files)
    _, warm = read_all(files)
    return DiskRead(
        bytes=size, seconds=round(seconds, 3), dropped_by=dropped_by, warm_seconds=round(warm, 3)
    )


class DraftReadsAllBackend(EngineBackend):
    """The product's engine with the draft_shards patch off: SGLang's own NEXTN draft load,
    which reads every shard of the checkpoint again."""

    def _boot_environment(self) -> dict[str, str]:
        environment = super()._boot_environment()
        plan = replace(PatchPlan.from_json(environment[PLAN_ENV]), draft_own_shards=False)
        return {**environment, PLAN_ENV: plan.to_env()}


async def boot(
    fmt: str, cold: bool, draft_reads_all: bool, checkpoint: Path, out: Path, files: list[Path]
) -> LoadRow:
    """One boot of the stack from `checkpoint` in format `fmt`."""
    state = ("cold" if cold else "warm") + ("-all" if draft_reads_all else "")
    if cold:
        drop_cache(files)
    else:
        read_all(files)  # every shard in the page cache
    config = EngineConfig(
        model_path=str(checkpoint),
        profile="stack",
        log_dir=out / f"{fmt}-{state}",
        context_length=4096,
        overrides={"log_level": "info", **FORMATS[fmt]},
    )
    backend = (DraftReadsAllBackend if draft_reads_all else EngineBackend)(config)
    began: dict[str, float] = {}
    took: dict[str, float] = {}
    row: dict[str, Any] = {
        "format": fmt,
        "cold": cold,
        "draft_reads_all": draft_reads_all,
        "booted": False,
    }
    try:
        async for stage in backend.start():
            began.setdefault(stage.name, stage.elapsed_s)
            if stage.done:
                took[stage.name] = stage.elapsed_s - began[stage.name]
        report = await backend.proof()
        row.update(
            booted=True,
            proof=report.summary(),
            proof_ok=report.ok,
            failed=[f"{line.title}: {line.evidence}" for line in report.failed],
        )
    except Exception as exc:  # one line: the row says why
        row["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    finally:
        await backend.shutdown()
    progress = backend.load_progress
    seconds = dict(progress.seconds) if progress else {}
    seconds["warmup"] = took.get(WARMUP_STAGE, 0.0)
    log = backend.log_file.read_text(errors="replace") if backend.log_file.exists() else ""
    row.update(
        reader=progress.reader if progress else "",
        passes=progress.passes if progress else 0,
        bytes=progress.bytes_all if progress else 0,
        seconds={name: round(s, 2) for name, s in seconds.items()},
        import_s=round(took.get("Importing SGLang", 0.0), 2),
        boot_s=round(took.get(LOAD_STAGE, 0.0), 2),
        notes=sorted({line.strip()[:200] for line in log.splitlines() if NOTES.search(line)})[:4],
    )
    return LoadRow(**row)


def load_bench(path: Path, layers: int, checkpoint_bytes: int) -> LoadBench:
    """The file's record so far (an earlier step of the same run), or a new one."""
    if path.exists():
        bench = LoadBench.from_dict(json.loads(path.read_text()))
        if (bench.layers, bench.checkpoint_bytes) == (layers, checkpoint_bytes):
            return bench
    return LoadBench(layers=layers, checkpoint_bytes=checkpoint_bytes)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--checkpoint", type=Path, default=Path("/root/ckpt12"))
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--runs", default="auto:cold,auto:warm")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--checkpoint-only", action="store_true", help="write it, no more")
    args = parser.parse_args()
    if args.checkpoint_only:
        ensure_checkpoint(args.checkpoint, args.layers)
        return
    if args.json is None:
        parser.error("--json is needed to record the runs")
    runs = [run.split(":") for run in args.runs.split(",")]
    for fmt, *state in runs:
        if (
            fmt not in FORMATS
            or state[:1] not in (["cold"], ["warm"])
            or state[1:] not in ([], ["all"])
        ):
            parser.error(
                f"a run is FORMAT:cold or FORMAT:warm, then :all for the draft reading every "
                f"shard, FORMAT one of {sorted(FORMATS)}"
            )
    ensure_checkpoint(args.checkpoint, args.layers)
    files = shards(args.checkpoint)
    bench = load_bench(args.json, args.layers, tensor_bytes([str(f) for f in files]))
    disk = measure_disk(files)
    bench.disks.append(disk)
    print(
        f"disk: {disk.gbps:.2f} GB/s cold ({disk.dropped_by}), {disk.warm_gbps:.2f} warm",
        flush=True,
    )
    if disk.gbps > 0.8 * disk.warm_gbps:
        print(
            "disk: WARNING the cold read was nearly as fast as the warm one: the page cache "
            "was not dropped, and no cold row below is cold",
            flush=True,
        )
    args.json.write_text(json.dumps(bench.to_dict(), indent=1))
    for fmt, state, *draft in runs:
        row = await boot(fmt, state == "cold", bool(draft), args.checkpoint, args.out, files)
        bench.rows.append(row)
        args.json.write_text(json.dumps(bench.to_dict(), indent=1))
        print(
            f"== {row.verdict()}; read {row.read_gbps:.2f} GB/s, "
            f"{row.bytes / bench.checkpoint_bytes:.2f} x the checkpoint in {row.passes} passes, "
            f"load {row.load_s:.1f} s, seconds {row.seconds}",
            flush=True,
        )
        for note in row.notes:
            print(f"   log: {note}", flush=True)
    print(table(bench), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
