"""A checkpoint folder in the layout of inclusionAI/Ling-3.0-flash-fp4, written from code.

Test support, never shipped weights. `write_checkpoint` writes config.json (models.py's, with
the real `quantization_config`), the safetensors shards (one per layer, named as a Hugging Face
checkpoint's), model.safetensors.index.json, and the tokenizer and chat template. Every tensor
SGLang 0.5.23's BailingMoeV3 loader reads is there (the list is the product's own,
`app.backend.checkpoint.layout`, so the GPU boot proves that list too), in the checkpoint's own
formats: MXFP4 experts with E8M0 scales, FP8 E4M3 linears with block scales, a BF16 head.

With `known_answer`, the weights are the known-answer model's (models.py, known_answer.py),
stored instead of written into the scheduler: embeddings E with unit-RMS rows (entries of +1
or -1 here, exact in BF16 and in FP8), head[P(x)] = E[x], every input_layernorm and
post_attention_layernorm 0 (each sublayer adds nothing, whatever its weights), the final norm
1; NEXTN: enorm, hnorm, final_layernorm 1 and eh_proj = [I | 0] in FP8 with block scales 1,
exact (1.0 is 0x38 in E4M3, and the ±1 embeddings quantize exactly too). Every other tensor is
finite filler in its format (checkpoint_bytes.py), so Humming's repack and the FP8 paths run on
real bytes. Nothing here needs torch: a 6-layer folder (about 11.6 GB) is written shard by
shard with little memory, and a shrunk `config` gives a CPU test a folder of a few MB.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from app.backend.checkpoint.layout import (
    FLOAT,
    FP8,
    PACKED_FP4,
    SCALE,
    TensorSpec,
    expected_tensors,
    nextn_layer,
)
from tests.gpu import checkpoint_bytes as raw
from tests.gpu import models

INDEX = "model.safetensors.index.json"
EMBED_SEED = 1234
ITEM_BYTES = {"BF16": 2, "F32": 4, "F8_E4M3": 1, "F8_E8M0": 1, "I8": 1}
KNOWN_ONES = ("model.norm.weight", ".enorm.weight", ".hnorm.weight", ".final_layernorm.weight")
KNOWN_ZEROS = (".input_layernorm.weight", ".post_attention_layernorm.weight")


def write_checkpoint(
    directory: Path,
    layers: int = 6,
    *,
    known_answer: bool = True,
    config: Mapping[str, Any] | None = None,
    tokenizer: bool = True,
) -> Path:
    """Write the checkpoint folder `directory` and return it.

    Args:
        layers: the model's depth (models.ling_config's shapes); ignored with `config`.
        known_answer: the known-answer weights (needs the cycle's tokens in the vocabulary).
        config: a config.json of your own (a shrunk one for CPU tests).
        tokenizer: write the test tokenizer and chat template (needs transformers).
    """
    directory.mkdir(parents=True, exist_ok=True)
    if tokenizer:
        models.write_model_dir(directory, layers)
    config = dict(config if config is not None else models.ling_config(layers))
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    values = Values(config, known_answer)
    shards = group_by_layer(expected_tensors(config), config)
    weight_map: dict[str, str] = {}
    total = 0
    for number, specs in enumerate(shards, 1):
        name = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(
            directory / name, [(s.name, dtype_of(s), s.shape) for s in specs], values
        )
        weight_map.update(dict.fromkeys((s.name for s in specs), name))
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (directory / INDEX).write_text(json.dumps(index, indent=2))
    return directory


def group_by_layer(specs: list[TensorSpec], config: Mapping[str, Any]) -> list[list[TensorSpec]]:
    """Shards: the embeddings, each layer, the NEXTN layer, then the final norm and head."""
    first: list[TensorSpec] = []
    last: list[TensorSpec] = []
    layers: dict[int, list[TensorSpec]] = {}
    for spec in specs:
        if spec.name.startswith("model.layers."):
            layers.setdefault(int(spec.name.split(".")[2]), []).append(spec)
        elif spec.name.startswith("model.word_embeddings"):
            first.append(spec)
        else:
            last.append(spec)
    ordered = [layers[i] for i in sorted(layers)]
    assert nextn_layer(config) in (None, max(layers)), "the NEXTN layer is the last one"
    return [first, *ordered, last]


def dtype_of(spec: TensorSpec) -> str:
    """The dtype written: BF16 floats, F32 linear scales, E8M0 expert scales, I8 experts
    (SGLang's parameter is int8: copied bit for bit, no cast)."""
    if spec.dtypes == SCALE:
        return "F8_E8M0" if ".experts." in spec.name else "F32"
    if spec.dtypes == FLOAT:
        return "BF16"
    assert spec.dtypes in (FP8, PACKED_FP4), spec
    return spec.dtypes[0]


def write_shard(path: Path, tensors: list[tuple[str, str, tuple[int, ...]]], values: Values) -> int:
    """One safetensors file (8-byte header length, JSON header, data), streamed tensor by
    tensor; returns its data bytes."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, dtype, shape in tensors:
        size = math.prod(shape) * ITEM_BYTES[dtype]
        header[name] = {
            "dtype": dtype,
            "shape": list(shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with path.open("wb") as out:
        out.write(struct.pack("<Q", len(text)) + text)
        for name, dtype, shape in tensors:
            written = 0
            for piece in values.of(name, dtype, shape):
                out.write(piece)
                written += len(piece)
            want = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            assert written == want, f"{name}: wrote {written} bytes of {want}"
    return offset


class Values:
    """Each tensor's bytes: the known answer's where it matters, filler elsewhere."""

    def __init__(self, config: Mapping[str, Any], known_answer: bool) -> None:
        self.vocab = int(config["vocab_size"])
        self.hidden = int(config["hidden_size"])
        self.known = known_answer
        self.fill = raw.Filler()
        self.inverse = inverse_permutation(self.vocab) if known_answer else None

    def of(self, name: str, dtype: str, shape: tuple[int, ...]) -> Iterable[bytes]:
        count = math.prod(shape)
        if name == "model.word_embeddings.weight":
            return raw.embedding_rows(self.vocab, self.hidden, EMBED_SEED)
        if name == "lm_head.weight":
            if self.inverse is None:
                return raw.embedding_rows(self.vocab, self.hidden, EMBED_SEED + 1)
            return raw.permuted_rows(self.vocab, self.hidden, EMBED_SEED, self.inverse)
        if self.known and name.endswith(KNOWN_ZEROS):
            return [raw.bf16_fill(count, 0.0)]
        if self.known and name.endswith(KNOWN_ONES):
            return [raw.bf16_fill(count, 1.0)]
        if self.known and ".eh_proj." in name:
            return self.identity(name, dtype, count)
        return [self.filler(name, dtype, count)]

    def identity(self, name: str, dtype: str, count: int) -> Iterator[bytes]:
        if name.endswith("weight_scale_inv"):
            yield raw.f32([1.0] * count)
        elif dtype == "F8_E4M3":
            yield from raw.identity_then_zero(self.hidden, bytes([raw.FP8_ONE]), b"\0")
        else:
            yield from raw.identity_then_zero(self.hidden, raw.bf16_fill(1, 1.0), b"\0\0")

    def filler(self, name: str, dtype: str, count: int) -> bytes:
        if dtype == "F8_E4M3":
            return self.fill.fp8(count)
        if dtype == "F8_E8M0":
            return self.fill.e8m0(count)
        if dtype == "F32":
            return raw.power_of_two_scales(count)
        if dtype == "I8":
            return self.fill.take(count)
        return self.fill.bf16(count)


def inverse_permutation(vocab: int) -> list[int]:
    """Q with head row y = E[Q[y]]: the inverse of P, the known-answer walk (models.py)."""
    walk = models.cycle()
    if max(walk) >= vocab:
        raise ValueError(
            f"the known answer needs {max(walk) + 1} tokens, the vocabulary has {vocab}"
        )
    inverse = list(range(vocab))
    for here, there in zip(walk, walk[1:] + walk[:1], strict=True):
        inverse[there] = here
    return inverse
