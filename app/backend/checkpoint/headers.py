"""Read a safetensors checkpoint's index and each shard's header, never its tensor data.

A safetensors file is an 8-byte little-endian header length, a JSON header (tensor name ->
dtype, shape, data_offsets relative to the end of the header), then the data.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MAX_HEADER_BYTES = 100_000_000
"""The safetensors library's own limit on a header."""
DTYPE_BITS = {
    "BOOL": 8,
    "U8": 8,
    "I8": 8,
    "F8_E4M3": 8,
    "F8_E5M2": 8,
    "F8_E8M0": 8,
    "F4": 4,
    "U16": 16,
    "I16": 16,
    "F16": 16,
    "BF16": 16,
    "U32": 32,
    "I32": 32,
    "F32": 32,
    "U64": 64,
    "I64": 64,
    "F64": 64,
}


class BadCheckpoint(Exception):
    """The folder cannot hold what the loader reads: one line naming the file (and tensor)."""


class Tensor(NamedTuple):
    """One tensor as a shard's header describes it (a tuple: a checkpoint has 127,000)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str
    nbytes: int


@dataclass(frozen=True, slots=True)
class Index:
    """model.safetensors.index.json: where each tensor is, and the shards SGLang loads."""

    weight_map: dict[str, str]
    shards: list[str]


def read_index(folder: Path) -> Index:
    """The index's weight map and shard files, or the single model.safetensors.

    Raises:
        BadCheckpoint: no index and no model.safetensors, or an index that is not one.
    """
    index = folder / INDEX
    if not index.is_file():
        if (folder / SINGLE).is_file():
            return Index({}, [SINGLE])
        raise BadCheckpoint(f"neither {INDEX} nor {SINGLE} is there: no weights")
    try:
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        mapping = {str(name): str(file) for name, file in weight_map.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadCheckpoint(f"{INDEX}: not a safetensors index ({exc})") from exc
    return Index(mapping, sorted(set(mapping.values())))


def read_shard(path: Path) -> list[Tensor]:
    """The tensors `path`'s header describes, checked against the file's own length.

    Raises:
        BadCheckpoint: the shard is missing, its header malformed, a tensor's bytes do not
            fit its dtype and shape, or the file is shorter than its header says.
    """
    name = path.name
    try:
        with path.open("rb") as shard:
            size = path.stat().st_size
            head = shard.read(8)
            if len(head) < 8:
                raise BadCheckpoint(f"{name}: {size} bytes, too short for a safetensors header")
            (length,) = struct.unpack("<Q", head)
            if length > min(MAX_HEADER_BYTES, size - 8):
                raise BadCheckpoint(
                    f"{name}: its header claims {length} bytes of a {size}-byte file: "
                    "not safetensors, or cut short"
                )
            text = shard.read(length)
    except FileNotFoundError:
        raise BadCheckpoint(
            f"{INDEX} names {name}, which is missing (an interrupted download?)"
        ) from None
    except OSError as exc:
        raise BadCheckpoint(f"{name}: cannot be read ({exc.strerror})") from exc
    try:
        header = json.loads(text)
        if not isinstance(header, dict):
            raise ValueError("not a JSON object")
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadCheckpoint(f"{name}: the safetensors header is not valid JSON ({exc})") from exc
    data = size - 8 - length
    tensors: list[Tensor] = []
    past: list[tuple[int, str]] = []
    new, prod = tuple.__new__, math.prod  # 127,000 entries at 42 layers: kept tight
    for key, value in header.items():
        if key == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = (
                value["dtype"],
                tuple(value["shape"]),
                value["data_offsets"],
            )
            nbytes = (prod(shape) * DTYPE_BITS[dtype] + 7) // 8
            ok = type(nbytes) is int and 0 <= begin <= end and end - begin == nbytes
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise BadCheckpoint(_entry_problem(name, key, value))
        tensors.append(new(Tensor, (key, dtype, shape, name, nbytes)))
        if end > data:
            past.append((end, key))
    if past:
        need = 8 + length + max(past)[0]
        raise BadCheckpoint(
            f"{name}: truncated: {size} bytes, its header needs {need}; {min(past)[1]} and "
            f"{len(past) - 1} more tensors end past its end (an interrupted download?)"
        )
    return tensors


def _entry_problem(file: str, name: str, value: Any) -> str:
    """Why a header entry is refused: malformed, an unknown dtype, or the wrong size."""
    try:
        dtype, shape, (begin, end) = value["dtype"], value["shape"], value["data_offsets"]
        count = math.prod(shape)
        if not all(type(n) is int and n >= 0 for n in (*shape, begin, end)) or begin > end:
            raise ValueError
    except (TypeError, KeyError, ValueError):
        return f"{file}: {name}'s header entry is malformed: {value!r:.80}"
    if dtype not in DTYPE_BITS:
        return f"{file}: {name} has dtype {dtype}, which safetensors does not define"
    need = (count * DTYPE_BITS[dtype] + 7) // 8
    return (
        f"{file}: {name} holds {end - begin} bytes, its dtype {dtype} and shape {shape} need {need}"
    )
