"""The weight load benchmark's records: one row per load format and page-cache state.

lab/scripts/gpu_load_bench.py writes them (JSON, `LoadBench.to_dict`); the table, the choice of
the fastest format that passed, and the Spark projection (lab/scripts/spark_load_projection.py)
read them. Seconds by stage come from the scheduler's progress records
(app/backend/engine/boot/load_progress.py): reading, SGLang's weight processing, Humming's
repack, the FP8 head, CUDA graphs, and the setup between them; the warm-up is the app's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any, Final

GB: Final = 1e9
STAGE_COLUMNS: Final = ("read", "process", "repack", "fp8_head", "graphs", "setup", "warmup")
"""The stages a row's seconds are split into, in the order a boot meets them."""
READERS: Final = {
    "auto": "buffered_multi_thread_safetensors_weights_iterator",
    "auto-nommap": "buffered_multi_thread_safetensors_weights_iterator",
    "auto-1thread": "safetensors_weights_iterator",
    "fastsafetensors": "fastsafetensors_weights_iterator",
    "instanttensor": "instanttensor_weights_iterator",
}
"""The weight iterator SGLang 0.5.23 runs for each format: another one is a fallback."""


@dataclass(frozen=True, slots=True)
class DiskRead:
    """The disk's own sequential read of the checkpoint's shards, cache dropped first."""

    bytes: int
    seconds: float
    dropped_by: str
    """How the cache was dropped: the kernel's `drop_caches` and POSIX_FADV_DONTNEED per
    shard, or the latter alone where `drop_caches` was denied."""
    warm_seconds: float = 0.0
    """The same read again, from the page cache."""

    @property
    def gbps(self) -> float:
        return self.bytes / self.seconds / GB if self.seconds > 0 else 0.0

    @property
    def warm_gbps(self) -> float:
        return self.bytes / self.warm_seconds / GB if self.warm_seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LoadRow:
    """One boot of the stack from the checkpoint in one format, cold or warm."""

    format: str
    cold: bool
    booted: bool
    proof: str = ""
    """The proof's summary, e.g. `stack: 8 pass, 0 fail, 0 off`."""
    proof_ok: bool = False
    failed: list[str] = field(default_factory=list)
    """The failed proof lines' titles and evidence."""
    error: str = ""
    """Why the boot failed (one line)."""
    reader: str = ""
    """The weight iterator that ran (the scheduler's last reading pass)."""
    passes: int = 0
    bytes: int = 0
    """Tensor bytes every reading pass yielded together."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Seconds by stage (STAGE_COLUMNS)."""
    import_s: float = 0.0
    boot_s: float = 0.0
    """SGLang's boot: from spawning its processes to its engine ready."""
    notes: list[str] = field(default_factory=list)
    """SGLang's log lines about a fallback or GPUDirect Storage."""
    draft_reads_all: bool = False
    """The NEXTN draft read every shard again (SGLang's own load, ling-chat's draft_shards
    patch off): the side-by-side row; otherwise only the shards of its layer."""

    @property
    def fallback(self) -> str:
        """Why this row did not run its format's own reader ('' when it did or none ran)."""
        expected = READERS.get(self.format)
        if not self.reader or expected is None or self.reader == expected:
            return ""
        return f"ran {self.reader}, not {expected}"

    @property
    def read_gbps(self) -> float:
        read = self.seconds.get("read", 0.0)
        return self.bytes / read / GB if read > 0 else 0.0

    @property
    def passed(self) -> bool:
        """Booted, proven, and read by its own format's reader."""
        return self.booted and self.proof_ok and not self.fallback

    @property
    def load_s(self) -> float:
        """The weight load: reading, processing, repack and FP8 head."""
        return sum(self.seconds.get(s, 0.0) for s in ("read", "process", "repack", "fp8_head"))

    @property
    def label(self) -> str:
        """Format, cache state and, for SGLang's own draft load, `draft reads all`."""
        return f"{self.format} {'cold' if self.cold else 'warm'}" + (
            " draft reads all" if self.draft_reads_all else ""
        )

    def verdict(self) -> str:
        """One line: passed, or how it failed or fell back."""
        if not self.booted:
            return f"{self.label}: FAILED to boot: {self.error}"
        if self.fallback:
            return f"{self.label}: FELL BACK: {self.fallback}"
        if not self.proof_ok:
            return f"{self.label}: proof FAILED: {'; '.join(self.failed)}"
        return f"{self.label}: passed ({self.proof})"


@dataclass(frozen=True, slots=True)
class LoadBench:
    """A benchmark run: the checkpoint, the disk's own reads, and the boots."""

    layers: int
    checkpoint_bytes: int
    disks: list[DiskRead] = field(default_factory=list)
    rows: list[LoadRow] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoadBench:
        """Raises ValueError (a field missing or of the wrong kind)."""
        try:
            return cls(
                layers=int(data["layers"]),
                checkpoint_bytes=int(data["checkpoint_bytes"]),
                disks=[DiskRead(**disk) for disk in data.get("disks", [])],
                rows=[LoadRow(**row) for row in data.get("rows", [])],
            )
        except (KeyError, TypeError) as err:
            raise ValueError(f"not a load benchmark record: {err}") from None


def median_row(rows: Sequence[LoadRow]) -> LoadRow:
    """The row at the median weight load; of an even count the slower middle one, so that
    what is projected from it errs long."""
    ordered = sorted(rows, key=lambda row: row.load_s)
    return ordered[len(ordered) // 2]


def groups(rows: Sequence[LoadRow], *, product_only: bool = False) -> dict[str, list[LoadRow]]:
    """The passing rows by label (format, cache state, draft load); `product_only`: only
    ling-chat's own draft load."""
    by_label: dict[str, list[LoadRow]] = {}
    for row in rows:
        if row.passed and not (product_only and row.draft_reads_all):
            by_label.setdefault(row.label, []).append(row)
    return by_label


def fastest_passed(rows: Sequence[LoadRow], *, cold: bool) -> tuple[str, float] | None:
    """The format whose passing rows (cold or warm, ling-chat's own draft load) have the
    shortest median weight load, and that median; None if none passed."""
    medians = [
        (group[0].format, median(row.load_s for row in group))
        for group in groups(rows, product_only=True).values()
        if group[0].cold == cold
    ]
    return min(medians, key=lambda pair: pair[1], default=None)


def spreads(rows: Sequence[LoadRow]) -> list[str]:
    """One line per format, cache state and draft load with two passing rows or more: the
    weight load's median and range."""
    lines = []
    for label, group in groups(rows).items():
        if len(group) > 1:
            loads = sorted(row.load_s for row in group)
            lines.append(
                f"spread, {label}: load {median(loads):.1f} s median, "
                f"{loads[0]:.1f}-{loads[-1]:.1f} s over {len(group)} runs"
            )
    return lines


def table(bench: LoadBench) -> str:
    """The per-stage table (formats x cold/warm), the disk's reads and each row's verdict."""
    gb = bench.checkpoint_bytes / GB
    lines = [f"checkpoint: {bench.layers} layers, {gb:.1f} GB of tensors"]
    for disk in bench.disks:
        lines.append(
            f"disk: {disk.gbps:.2f} GB/s read with the cache dropped ({disk.dropped_by}), "
            f"{disk.warm_gbps:.2f} GB/s from the page cache ({disk.bytes / GB:.1f} GB)"
        )
    header = f"{'format':<16} {'cache':<5} {'draft':<5} {'GB/s':>6} {'x ckpt':>6} " + " ".join(
        f"{name:>8}" for name in (*STAGE_COLUMNS, "load", "boot")
    )
    lines += [header + "  proof", "-" * (len(header) + 7)]
    for row in bench.rows:
        cells = [row.seconds.get(name, 0.0) for name in STAGE_COLUMNS]
        figures = " ".join(f"{s:8.1f}" for s in (*cells, row.load_s, row.boot_s))
        proof = "ok" if row.passed else "FAIL"
        share = row.bytes / bench.checkpoint_bytes if bench.checkpoint_bytes else 0.0
        lines.append(
            f"{row.format:<16} {'cold' if row.cold else 'warm':<5} "
            f"{'all' if row.draft_reads_all else 'own':<5} {row.read_gbps:6.2f} "
            f"{share:6.2f} {figures}  {proof}"
        )
    lines += [row.verdict() for row in bench.rows if not row.passed]
    lines += spreads(bench.rows)
    for cold in (True, False):
        best = fastest_passed(bench.rows, cold=cold)
        state = "cold" if cold else "warm"
        lines.append(
            f"fastest that passed, {state}: "
            + (f"{best[0]} ({best[1]:.1f} s load, median)" if best else "none")
        )
    return "\n".join(lines)
