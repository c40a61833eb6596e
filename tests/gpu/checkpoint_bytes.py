"""The bytes of a test checkpoint's tensors, in the checkpoint's own formats (no torch, no numpy).

Filler is finite and of a sane size in every format: FP8 E4M3 with the exponent's top bit
clear (|x| < 2, never the NaN bytes 0x7F/0xFF), E2M1 pairs (every byte is two valid values),
E8M0 scales from 2^-7 to 1 (never the NaN byte 0xFF), F32 block scales that are powers of two
(the checkpoint's `scale_fmt` is ue8m0), BF16 with |x| in [2^-7, 2). Filler is cut from one
random pool, so writing it costs no more than the disk; the embeddings are drawn row by row
(their rows must differ).
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator
from functools import lru_cache

POOL_BYTES = 8 << 20
_POOL = random.Random(31).randbytes(POOL_BYTES)
FP8_FINITE = bytes(b & 0xBF for b in range(256))
"""An E4M3 byte with the exponent's top bit cleared: |x| < 2, never NaN."""
E8M0_SANE = bytes(120 + (b & 7) for b in range(256))
"""A random byte as an E8M0 exponent from 2^-7 to 2^0."""
BF16_HIGH = bytes((b & 0x80) | (0x3C + (b & 3)) for b in range(256))
"""A random byte as BF16's high byte: any sign, exponent 2^-7 to 2^0."""
SIGN_ONE = bytes((b & 0x80) | 0x3F for b in range(256))
"""A random byte as the high byte of BF16 +1 or -1 (the low byte is 0x80)."""
FP8_ONE = 0x38
"""1.0 in E4M3."""
EMBED_CHUNK_ROWS = 1024


class Filler:
    """Random filler bytes cut from the pool at a moving offset."""

    def __init__(self) -> None:
        self._offset = 0

    def take(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            start = self._offset % POOL_BYTES
            piece = _POOL[start : start + n - len(out)]
            out += piece
            self._offset = start + len(piece) + 4099  # a prime stride: no two tensors alike
        return bytes(out)

    def fp8(self, n: int) -> bytes:
        return self.take(n).translate(FP8_FINITE)

    def e8m0(self, n: int) -> bytes:
        return self.take(n).translate(E8M0_SANE)

    def bf16(self, count: int) -> bytes:
        return interleave(self.take(count), self.take(count).translate(BF16_HIGH))


def interleave(low: bytes, high: bytes) -> bytes:
    """Little-endian 2-byte values from their low and high bytes."""
    out = bytearray(2 * len(low))
    out[0::2] = low
    out[1::2] = high
    return bytes(out)


def f32(values: list[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def power_of_two_scales(count: int) -> bytes:
    """F32 block scales 2^-9 .. 2^-6, as a ue8m0 checkpoint's are."""
    return f32([2.0 ** -(6 + i % 4) for i in range(count)])


def bf16_fill(count: int, value: float) -> bytes:
    """`count` BF16 copies of `value` (exact for 0 and 1)."""
    high = struct.pack("<f", value)[2:]
    return high * count


@lru_cache(maxsize=4)
def embedding_chunk(chunk: int, hidden: int, seed: int) -> bytes:
    """Rows chunk*EMBED_CHUNK_ROWS.. of the embeddings E: BF16 entries of +1 or -1 (unit RMS,
    exact in BF16 and in FP8), the same for the same (chunk, seed)."""
    count = EMBED_CHUNK_ROWS * hidden
    signs = random.Random(seed * 1_000_003 + chunk).randbytes(count)
    return interleave(b"\x80" * count, signs.translate(SIGN_ONE))


def embedding_rows(vocab: int, hidden: int, seed: int) -> Iterator[bytes]:
    """E, in chunks of rows."""
    for chunk in range(-(-vocab // EMBED_CHUNK_ROWS)):
        rows = min(EMBED_CHUNK_ROWS, vocab - chunk * EMBED_CHUNK_ROWS)
        yield embedding_chunk(chunk, hidden, seed)[: rows * hidden * 2]


def embedding_row(x: int, hidden: int, seed: int) -> bytes:
    chunk, row = divmod(x, EMBED_CHUNK_ROWS)
    width = hidden * 2
    return embedding_chunk(chunk, hidden, seed)[row * width : (row + 1) * width]


def permuted_rows(vocab: int, hidden: int, seed: int, inverse: list[int]) -> Iterator[bytes]:
    """Rows E[inverse[y]] for y in order: the known-answer head, head[P(x)] = E[x]."""
    width = hidden * 2
    moved = {y: x for y, x in enumerate(inverse) if x != y}
    for chunk, rows in enumerate(embedding_rows(vocab, hidden, seed)):
        first = chunk * EMBED_CHUNK_ROWS
        out = bytearray(rows)
        for y in range(first, first + len(rows) // width):
            if y in moved:
                out[(y - first) * width : (y - first + 1) * width] = embedding_row(
                    moved[y], hidden, seed
                )
        yield bytes(out)


def identity_then_zero(hidden: int, one: bytes, zero: bytes) -> Iterator[bytes]:
    """[I | 0], a [hidden, 2*hidden] matrix, row by row (`one`, `zero`: one element each)."""
    for row in range(hidden):
        yield zero * row + one + zero * (2 * hidden - row - 1)
