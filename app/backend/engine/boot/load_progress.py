"""The weight load's progress: a small JSON file the scheduler rewrites, read by the app.

The scheduler (app/backend/engine/patches/load_watch.py) counts the bytes of the tensors
SGLang's weight iterators yield and times each stage of the load; it replaces the file
whole (a rename) at most `WRITES_PER_S` times a second. The app reads it while the engine
boots and shows the line `progress_line` makes. Every figure comes from the record: the rate
is the bytes read over the seconds spent reading, the time left is what remains at that
rate; a figure the record cannot support is left out, never guessed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Final

from app.backend.protocol import LoadStage
from app.files import write_atomic

WRITES_PER_S: Final = 4
GB: Final = 1e9
"""Decimal gigabytes, as disks and the recipe's "66 GB" count."""
MIN_RATE_S: Final = 0.5
"""No rate (nor time left) before this many seconds of reading: too few bytes to say."""
MIN_RATE_BYTES: Final = GB / 10
"""No rate (nor time left) before the pass has read this much, the line's smallest figure: a
reader's first yields are small tensors read while its threads start, whose rate (0.0 GB/s,
days left) is none the load will keep."""
STAGES: Final = {
    "read": "Reading weights",
    "process": "Processing the weights",
    "repack": "Repacking the MoE weights for Humming",
    "fp8_head": "Quantizing the LM head to FP8",
    "graphs": "Capturing CUDA graphs",
    "setup": "Setting up the engine",
}
"""The load's stages as the scheduler names them, and as people read them. `setup` is
what lies between them: the model's init, the KV cache, the draft's model."""
DRAFT_READ: Final = "Reading the draft's weights"
"""A second reading pass: the draft model's load (a NEXTN draft reads the checkpoint again),
counted from zero against its own files, so that the first pass's time left stays its own."""
SHOWN: Final = frozenset(STAGES) - {"setup"}
"""Stages whose progress replaces SGLang's log line on the start screen."""


@dataclass(frozen=True, slots=True)
class LoadProgress:
    """One snapshot of the load, written by the scheduler."""

    stage: str
    """A key of STAGES: what the scheduler does now."""
    bytes_read: int = 0
    """Tensor bytes the current reading pass has yielded (a NEXTN draft reads the
    checkpoint a second time: a second pass)."""
    bytes_total: int = 0
    """Tensor bytes of the current pass's files, from their headers (0: unknown)."""
    read_s: float = 0.0
    """Seconds since the current pass began reading, when this snapshot was taken."""
    passes: int = 0
    """Reading passes begun so far."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Seconds spent in each stage so far, the current one included (read: all passes)."""
    bytes_all: int = 0
    """Tensor bytes yielded by every pass so far."""
    reader: str = ""
    """The weight iterator of the current pass (SGLang's function name)."""

    @property
    def rate(self) -> float | None:
        """Bytes a second of the current pass, or None before there is enough to say."""
        if self.read_s < MIN_RATE_S or self.bytes_read < MIN_RATE_BYTES:
            return None
        return self.bytes_read / self.read_s

    @property
    def seconds_left(self) -> float | None:
        """Seconds the current pass needs at its rate so far, or None (no rate, no total)."""
        rate = self.rate
        if rate is None or self.bytes_total <= 0:
            return None
        return max(0, self.bytes_total - self.bytes_read) / rate

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def read_progress(path: Path) -> LoadProgress | None:
    """The snapshot in `path`; None when it is absent, unreadable or not a snapshot."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        progress = LoadProgress(**data)
    except (OSError, ValueError, TypeError):
        return None
    if progress.stage not in STAGES or not isinstance(progress.reader, str) or not _valid(progress):
        return None
    return progress


def _valid(p: LoadProgress) -> bool:
    numbers = (p.bytes_read, p.bytes_total, p.read_s, p.passes, p.bytes_all)
    if not all(isinstance(n, int | float) and not isinstance(n, bool) for n in numbers):
        return False
    if min(numbers) < 0 or not isinstance(p.seconds, dict):
        return False
    return all(isinstance(s, int | float) and s >= 0 for s in p.seconds.values())


def write_progress(path: Path, progress: LoadProgress) -> None:
    """Replace `path` whole with `progress` (a reader never sees half a file); private to the
    user, as the logs beside it. Not synced to the disk: a crash may lose a snapshot.

    Raises:
        ExportError: the file cannot be written.
    """
    write_atomic(path, [progress.to_json()], replace=True, sync=False)


def progress_line(progress: LoadProgress) -> str:
    """What the start screen shows, e.g. `Reading weights  12.4 of 66.0 GB  2.1 GB/s  about
    26 s left` (60 characters at most for a load under 1,000 GB and 1,000 s): only the
    figures the snapshot supports."""
    name = STAGES[progress.stage]
    if progress.stage != "read":
        return name
    parts = [DRAFT_READ if progress.passes >= 2 else name]
    done = progress.bytes_read / GB
    if progress.bytes_total > 0:
        parts.append(f"{done:.1f} of {progress.bytes_total / GB:.1f} GB")
    else:
        parts.append(f"{done:.1f} GB")
    if (rate := progress.rate) is not None:
        parts.append(f"{rate / GB:.1f} GB/s")
    if (left := progress.seconds_left) is not None:
        parts.append(f"about {left:.0f} s left")
    return "  ".join(parts)


def progress_stage(name: str, progress: LoadProgress | None, elapsed_s: float) -> LoadStage | None:
    """Start-up stage `name`'s update from `progress`, with the bytes while they are read;
    None when there is none to show (no record, or a stage SGLang's log tells better)."""
    if progress is None or progress.stage not in SHOWN:
        return None
    reading = progress.stage == "read" and progress.bytes_total > 0
    return LoadStage(
        name,
        False,
        elapsed_s,
        progress_line(progress),
        progress.bytes_read if reading else None,
        progress.bytes_total if reading else None,
    )
