"""Check a checkpoint folder's headers against the tensors the loader reads (no tensor data).

SGLang 0.5.23's loader skips a tensor it does not find and copies one of another dtype by
value, so a missing expert scale or scales saved as raw bytes load without an error and compute
garbage; a wrong shape fails minutes into the load. This check refuses them first, in one line
naming the tensor and the file. Tensors the loader ignores are allowed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from app.backend.checkpoint.headers import (
    INDEX,
    BadCheckpoint,
    Tensor,
    read_index,
    read_shard,
)
from app.backend.checkpoint.layout import (
    TensorSpec,
    UnsupportedLayout,
    expected_tensors,
    unsupported,
)

LOADER = "SGLang 0.5.23's BailingMoeV3 loader"


@dataclass(frozen=True, slots=True)
class CheckpointReport:
    """What the check found in one folder."""

    folder: Path
    problems: tuple[str, ...] = ()
    """One line each, naming the file and, where there is one, the tensor."""
    tensors: int = 0
    shards: int = 0
    data_bytes: int = 0
    unchecked: str = ""
    """Why the tensors were not compared with the loader's (another architecture), or ""."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        """The first problem (and how many more), or what was checked."""
        if self.problems:
            more = len(self.problems) - 1
            return self.problems[0] + (f" (and {more} more problems)" if more else "")
        size = f"{self.tensors} tensors in {self.shards} shards ({self.data_bytes / 1e9:.1f} GB)"
        if self.unchecked:
            return f"{size}; names not checked: {self.unchecked}"
        return f"{size}, each as {LOADER} reads it"


def check_checkpoint(folder: Path) -> CheckpointReport:
    """Read config.json, the index and every shard's header; compare with `expected_tensors`."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
    except (OSError, ValueError) as exc:
        return CheckpointReport(folder, (f"config.json: cannot be read ({exc})",))
    try:
        index = read_index(folder)
    except BadCheckpoint as exc:
        return CheckpointReport(folder, (str(exc),))
    found: dict[str, Tensor] = {}
    problems: list[str] = []
    for shard in index.shards:
        try:
            tensors = read_shard(folder / shard)
        except BadCheckpoint as exc:
            problems.append(str(exc))
            continue
        found.update({t.name: t for t in tensors if t.name not in found})
    data = sum(t.nbytes for t in found.values())
    report = CheckpointReport(folder, (), len(found), len(index.shards), data)
    if problems:
        return dataclasses.replace(report, problems=tuple(problems))
    if why := unsupported(config):
        return dataclasses.replace(report, unchecked=why)
    try:
        specs = expected_tensors(config)
    except UnsupportedLayout as exc:
        return dataclasses.replace(report, problems=(str(exc),))
    for spec in specs:
        tensor = found.get(spec.name)
        differs = tensor is None or tensor.dtype not in spec.dtypes or tensor.shape != spec.shape
        if differs and (problem := _compare(spec, found, index.weight_map)):  # "": an alias
            problems.append(problem)
    return dataclasses.replace(report, problems=tuple(problems))


def _compare(spec: TensorSpec, found: dict[str, Tensor], weight_map: dict[str, str]) -> str:
    """The line saying how the checkpoint's `spec.name` differs from the loader's, or ""."""
    tensor = next((found[n] for n in (spec.name, *spec.aliases) if n in found), None)
    if tensor is None:
        if file := weight_map.get(spec.name):
            return f"{file}: lacks {spec.name} ({INDEX} places it there)"
        return f"{INDEX}: no shard holds {spec.name}, which {LOADER} needs"
    if tensor.dtype not in spec.dtypes:
        return (
            f"{tensor.file}: {tensor.name} is {tensor.dtype}; {LOADER} reads "
            f"{' or '.join(spec.dtypes)}"
        )
    if tensor.shape != spec.shape:
        return (
            f"{tensor.file}: {tensor.name} has shape {list(tensor.shape)}; {LOADER} needs "
            f"{list(spec.shape)}"
        )
    return ""
