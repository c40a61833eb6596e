"""Broken copies of a checkpoint folder, as downloads and conversions break them.

`break_copy` links every file of a good folder into a new one (hard links: no bytes copied)
and writes one shard anew with the breakage, so a 10 GB checkpoint's copy costs one shard.
Each breakage returns the tensor (or "") and the file the refusal must name.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

INDEX = "model.safetensors.index.json"
BREAKAGES = (
    "missing_tensor",  # an expert's down_proj scale left out of its shard
    "scale_as_raw_bytes",  # an expert scale stored as U8 exponents instead of F8_E8M0
    "scale_shape",  # an expert scale with groups of 64 instead of 32
    "shard_deleted",  # a shard the index names is not there
    "shard_truncated",  # a shard cut short, as an interrupted download leaves it
    "header_garbage",  # a shard whose header is not JSON
)
Entry = tuple[str, str, list[int], bytes]
"""(name, dtype, shape, data) of one tensor."""


def break_copy(good: Path, dest: Path, breakage: str) -> tuple[str, str]:
    """`dest`: `good` with `breakage`; returns (tensor or "", file) the refusal must name."""
    linked_copy(good, dest)
    weight_map: dict[str, str] = json.loads((good / INDEX).read_text())["weight_map"]
    scale = next(n for n in weight_map if ".experts.1.down_proj.weight_scale_inv" in n)
    moe_shard = weight_map[scale]
    smallest = min(set(weight_map.values()), key=lambda f: (good / f).stat().st_size)
    if breakage in ("missing_tensor", "scale_as_raw_bytes", "scale_shape", "shard_deleted"):
        (dest / moe_shard).unlink()  # a link to the good file: written anew, never through it
    if breakage == "missing_tensor":
        rewrite(good / moe_shard, dest / moe_shard, lambda e: None if e[0] == scale else e)
        return scale, moe_shard
    if breakage == "scale_as_raw_bytes":
        rewrite(good / moe_shard, dest / moe_shard, lambda e: _retyped(e, scale, "U8"))
        return scale, moe_shard
    if breakage == "scale_shape":
        rewrite(good / moe_shard, dest / moe_shard, lambda e: _halved(e, scale))
        return scale, moe_shard
    if breakage == "shard_deleted":
        return "", moe_shard
    (dest / smallest).unlink()
    if breakage == "shard_truncated":
        keep = (good / smallest).stat().st_size - 1000
        with (good / smallest).open("rb") as src, (dest / smallest).open("wb") as out:
            out.write(src.read(keep))
        return _cut_tensor(good / smallest, keep), smallest
    if breakage == "header_garbage":
        data = bytearray((good / smallest).read_bytes())
        data[8:16] = b"<html>\n "  # a proxy's error page where the JSON header was
        (dest / smallest).write_bytes(bytes(data))
        return "", smallest
    raise ValueError(f"unknown breakage {breakage!r}")


def read_entries(path: Path) -> tuple[dict[str, Any], int]:
    """A shard's header and where its data starts."""
    with path.open("rb") as shard:
        (length,) = struct.unpack("<Q", shard.read(8))
        return json.loads(shard.read(length)), 8 + length


def linked_copy(good: Path, dest: Path) -> Path:
    """`dest` holding hard links to `good`'s files (unlink one before writing it anew)."""
    dest.mkdir(parents=True)
    for item in good.iterdir():
        os.link(item, dest / item.name)
    return dest


def rewrite(
    src: Path, dest: Path, edit: Callable[[Entry], Entry | None], extra: Sequence[Entry] = ()
) -> None:
    """Copy shard `src` to `dest` tensor by tensor through `edit` (None drops the tensor),
    then `extra`."""
    header, start = read_entries(src)
    header.pop("__metadata__", None)
    kept: list[Entry] = []
    with src.open("rb") as shard:
        for name, entry in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
            begin, end = entry["data_offsets"]
            shard.seek(start + begin)
            edited = edit((name, entry["dtype"], entry["shape"], shard.read(end - begin)))
            if edited is not None:
                kept.append(edited)
    kept += extra
    new: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape, data in kept:
        new[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(new).encode()
    text += b" " * (-len(text) % 8)
    with dest.open("wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for *_, data in kept:
            out.write(data)


def _retyped(entry: Entry, name: str, dtype: str) -> Entry:
    return (entry[0], dtype, entry[2], entry[3]) if entry[0] == name else entry


def _halved(entry: Entry, name: str) -> Entry:
    """The tensor `name` with half the columns: scales for groups of 64."""
    if entry[0] != name:
        return entry
    rows, cols = entry[2]
    width = len(entry[3]) // (rows * cols)
    data = b"".join(
        entry[3][r * cols * width : (r * cols + cols // 2) * width] for r in range(rows)
    )
    return (name, entry[1], [rows, cols // 2], data)


def _cut_tensor(path: Path, keep: int) -> str:
    """The first tensor a cut after `keep` bytes leaves incomplete."""
    header, start = read_entries(path)
    header.pop("__metadata__", None)
    ends = [(start + entry["data_offsets"][1], name) for name, entry in header.items()]
    return min(end for end in ends if end[0] > keep)[1]
