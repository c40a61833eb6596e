"""A projection (not a measurement) of the 66 GB weight load on a DGX Spark, by stage.

From one load format's rows of the H200 benchmark (lab/research/load_bench.py):
- reading: 66 GB and what the NEXTN draft reads on top (its own layer's shards, the same
  bytes at any depth; the whole checkpoint again in a `draft reads all` row, scaled with
  it), at the slower of the Spark's disk and the format's own pipeline: the fastest rate any
  of its rows reached on the H200 (a warm row's, read from the page cache, for a format that
  reads through it; a format with direct I/O, such as InstantTensor, reads from the disk
  warm or cold, so its rate is the H200 disk's and bounds its pipeline from below), scaled
  by the Spark's CPU speed against the H200 host's;
- SGLang's weight processing and Humming's repack: the benchmark's seconds scaled by the
  checkpoint's bytes (66 GB over the benchmark checkpoint's), times the Spark GPU's slowdown;
- the FP8 head: the same head at any depth, times the slowdown.
Every Spark figure it uses is an assumption (`SparkAssumptions`), printed with the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from lab.research.load_bench import GB, LoadBench, LoadRow, median_row

RECIPE_LOAD_S: Final = 342.0
"""The official Spark recipe's weight load: 342 s for 66 GB (193 MB/s)."""
CHECKPOINT_BYTES: Final = 66e9
"""Ling-3.0-flash-fp4's tensors, as the recipe counts them."""
GOAL_S: Final = 90.0
UNIFIED_GIB: Final = 121.0
"""The Spark's unified memory that CUDA reports: the weights and the page cache share it."""


@dataclass(frozen=True, slots=True)
class SparkAssumptions:
    """What the projection assumes of the Spark: none of it measured here."""

    disk_gbps: float = 5.0
    """Sequential read of its NVMe drive: PCIe Gen 4 x4 (Dell's GB10 owner's manual), the
    drive's own rate unpublished; Gen 4 x4 tops out near 7 GB/s."""
    cpu_factor: float = 1.0
    """Its CPU's speed at the reading pipeline (one process's threads copying shards) over
    the H200 host's: 10 Cortex-X925 cores against a server's, taken as equal."""
    gpu_slowdown: float = 4800.0 / 273.0
    """How much longer processing, repack and head take on the GB10 than on the H200: the
    two memory bandwidths' ratio (4.8 TB/s over 273 GB/s), the bound if the stages are
    bandwidth-bound; compute-bound stages would be faster."""


@dataclass(frozen=True, slots=True)
class SparkLoad:
    """The projected load of one format, by stage, and what it rests on."""

    format: str
    read_s: float
    process_s: float
    repack_s: float
    fp8_head_s: float
    read_bytes: float
    """Bytes the load reads: the checkpoint's and the NEXTN draft's pass."""
    pipeline_gbps: float
    """The format's reading pipeline on the Spark (the H200's, times cpu_factor)."""
    disk_bound: bool
    """The Spark's disk, not the pipeline, limits the read."""
    break_even_disk_gbps: float | None
    """The disk read that would bring the load to GOAL_S (None: no disk can)."""
    double_buffer_gib: float
    """Weights and a full page-cache copy of the checkpoint together, GiB."""
    assumptions: SparkAssumptions
    draft_reads_all: bool = False
    """Projected from rows where the NEXTN draft read every shard again."""

    @property
    def label(self) -> str:
        return self.format + (" draft reads all" if self.draft_reads_all else "")

    @property
    def load_s(self) -> float:
        return self.read_s + self.process_s + self.repack_s + self.fp8_head_s

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "load_s": self.load_s}


def format_rows(bench: LoadBench, fmt: str, *, draft_reads_all: bool = False) -> list[LoadRow]:
    """The format's passing rows of one draft load."""
    return [
        r
        for r in bench.rows
        if (r.format, r.draft_reads_all, r.passed) == (fmt, draft_reads_all, True)
    ]


def project(
    bench: LoadBench,
    fmt: str,
    spark: SparkAssumptions | None = None,
    *,
    draft_reads_all: bool = False,
) -> SparkLoad:
    """The Spark's load of the 66 GB checkpoint under `fmt` (`draft_reads_all`: from the rows
    where the NEXTN draft read every shard again).

    Raises:
        ValueError: no passing row of `fmt`, or its rows read nothing.
    """
    spark = spark or SparkAssumptions()
    rows = format_rows(bench, fmt, draft_reads_all=draft_reads_all)
    if not rows:
        reads = " with the draft reading all shards" if draft_reads_all else ""
        raise ValueError(f"no passing row of format {fmt!r}{reads} in the benchmark")
    cold = [row for row in rows if row.cold]
    base = median_row(cold or rows)  # the stages' seconds: a cold load's
    fastest = max(row.read_gbps for row in rows)
    if fastest <= 0 or bench.checkpoint_bytes <= 0:
        raise ValueError(f"format {fmt!r}: its rows read no bytes")
    pipeline = fastest * spark.cpu_factor
    rate = min(spark.disk_gbps, pipeline)
    scale = CHECKPOINT_BYTES / bench.checkpoint_bytes
    if base.draft_reads_all:
        read_bytes = base.bytes * scale
    else:  # the draft's layer is one NEXTN layer at any depth
        read_bytes = CHECKPOINT_BYTES + max(0, base.bytes - bench.checkpoint_bytes)
    process = base.seconds.get("process", 0.0) * scale * spark.gpu_slowdown
    repack = base.seconds.get("repack", 0.0) * scale * spark.gpu_slowdown
    head = base.seconds.get("fp8_head", 0.0) * spark.gpu_slowdown
    left = GOAL_S - process - repack - head
    break_even = read_bytes / GB / left if left > 0 else None
    if break_even is not None and break_even > pipeline:
        break_even = None  # the pipeline, not the disk, would have to be faster
    return SparkLoad(
        format=fmt,
        read_s=read_bytes / GB / rate,
        read_bytes=read_bytes,
        process_s=process,
        repack_s=repack,
        fp8_head_s=head,
        pipeline_gbps=pipeline,
        disk_bound=spark.disk_gbps <= pipeline,
        break_even_disk_gbps=break_even,
        double_buffer_gib=2 * CHECKPOINT_BYTES / 2**30,
        assumptions=spark,
        draft_reads_all=draft_reads_all,
    )


def projection_table(loads: Sequence[SparkLoad]) -> str:
    """Each format's projected stages beside the recipe's 342 s and the 90 s goal."""
    spark = loads[0].assumptions if loads else SparkAssumptions()
    lines = [
        "PROJECTION, not a measurement: the 66 GB load on a DGX Spark, from the H200's stages",
        f"assumed: disk {spark.disk_gbps:.1f} GB/s, CPU x{spark.cpu_factor:.2f} of the H200 "
        f"host's, GPU stages x{spark.gpu_slowdown:.1f} slower; the recipe measured "
        f"{RECIPE_LOAD_S:.0f} s; goal {GOAL_S:.0f} s",
        f"{'format':<32} {'GB read':>7} {'read':>7} {'process':>8} {'repack':>7} {'head':>6} "
        f"{'load':>7}  limit",
    ]
    for load in loads:
        limit = "disk" if load.disk_bound else f"pipeline {load.pipeline_gbps:.1f} GB/s"
        lines.append(
            f"{load.label:<32} {load.read_bytes / GB:7.1f} {load.read_s:7.1f} "
            f"{load.process_s:8.1f} {load.repack_s:7.1f} "
            f"{load.fp8_head_s:6.1f} {load.load_s:7.1f}  {limit}"
        )
        if load.break_even_disk_gbps is not None:
            lines.append(f"  {GOAL_S:.0f} s needs a disk of {load.break_even_disk_gbps:.1f} GB/s")
        else:
            lines.append(f"  no disk reaches {GOAL_S:.0f} s: the other stages or the pipeline")
    if loads:
        lines.append(
            f"weights and a page-cache copy of them: {loads[0].double_buffer_gib:.0f} GiB, over "
            f"the {UNIFIED_GIB:.0f} GiB unified memory: a cold load must not keep what it read"
        )
    return "\n".join(lines)
