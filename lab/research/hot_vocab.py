"""The hot-vocabulary draft head: the list from token counts, its coverage, the acceptance it
keeps, and a DGX Spark projection of a round priced from that coverage.

The list (`rank`): the tokenizer's special tokens first (a draft must be able to propose
`</think>` and the end of text), then the corpus's tokens by count (ties by id), then the
ids the corpus never showed in id order (a BPE id grows with its merge's rank: lower ids
were merged earlier, from more frequent pairs in the tokenizer's own training text).

Coverage (`coverage`): the share of a corpus's tokens that are hot.

Acceptance (`accept_length`), a stated model: NEXTN drafts k tokens top-1 and each is
accepted with probability p given the previous one was; with a hot head, a draft position
is accepted only where the target's token is hot, taken as independent of the draft being
right, with probability c (the coverage): q = p * c a position and
a = 1 + q + ... + q^k tokens a round (the bonus included). It is conservative: where the
target's token is hot, a draft restricted to the hot rows is right at least as often as
the full one (its full-vocabulary argmax, when right, is that hot token).

The projection (`project`), not a measurement: a round's bytes from the byte model (the
stack's, less the rows the hot head does not read, linear in them), read at the bandwidth
fitted to NVIDIA's Spark TPOTs (lab/research/spark_fit.py; its fixed cost per kernel is
held at 0 and the hot head launches no more kernels), and TPOT = round / a.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from app.bench.bytemodel.kernels import Phase
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.bytemodel.unit_bytes import unit_bytes
from app.levers.draft.hot_vocab import ROWS
from app.levers.draft.nextn import STEPS

SIZES = (16384, 32768, 65536)
"""The hot heads compared: the lever's 32K, half and twice it."""
PUBLISHED_ACCEPT = 2.68
"""NEXTN's accept length on GSM8K on the Spark at k = 3 (NVIDIA's blog, in
shared/research/perf-anchors.md): p = 0.74 a draft."""
CONTEXT_TOKENS = 32768 + 1024
"""The context of the published Spark TPOTs the bandwidth was fitted at."""


TEXT_FIELDS = ("question", "answer", "text", "content")
"""The fields of a JSON-lines corpus whose strings are counted (GSM8K's are the first two)."""


def texts(path: Path) -> list[str]:
    """A corpus file's texts: each line's TEXT_FIELDS of a `.jsonl` file, else the whole file."""
    raw = path.read_text(encoding="utf-8")
    if path.suffix != ".jsonl":
        return [raw]
    found = []
    for line in raw.splitlines():
        if line.strip():
            record = json.loads(line)
            found += [record[k] for k in TEXT_FIELDS if isinstance(record.get(k), str)]
    return found


def count(sequences: Iterable[Sequence[int]]) -> Counter[int]:
    """How often each token id occurs over tokenized texts."""
    counts: Counter[int] = Counter()
    for ids in sequences:
        counts.update(ids)
    return counts


def rank(counts: Counter[int], vocab_size: int, first: Sequence[int] = ()) -> tuple[int, ...]:
    """Every id of the vocabulary, hottest first: `first`, then by count, then unseen by id."""
    head = list(dict.fromkeys(first))
    taken = set(head)
    seen = sorted((i for i in counts if i not in taken), key=lambda i: (-counts[i], i))
    taken.update(seen)
    return (*head, *seen, *(i for i in range(vocab_size) if i not in taken))


def coverage(counts: Counter[int], hot: Iterable[int]) -> float:
    """The share of the counted tokens that are in `hot` (1.0 for no tokens)."""
    total = sum(counts.values())
    hot_set = set(hot)
    return sum(n for i, n in counts.items() if i in hot_set) / total if total else 1.0


def accept_length(p: float, c: float = 1.0, steps: int = STEPS) -> float:
    """Tokens a round: a chain of `steps` drafts each kept with probability p * c, and the
    bonus."""
    q = p * c
    return math.fsum(q**i for i in range(steps + 1))


def per_draft_acceptance(a: float, steps: int = STEPS) -> float:
    """The p that gives accept length `a` with every token hot.

    Raises:
        ValueError: `a` outside 1 .. steps + 1.
    """
    if not 1.0 <= a <= steps + 1:
        raise ValueError(f"an accept length of {steps} drafts is 1 to {steps + 1}, got {a}")
    return _solve(lambda p: accept_length(p, 1.0, steps), a)


def _solve(rising: Callable[[float], float], target: float) -> float:
    """The x in [0, 1] where the rising function reaches `target` (bisection)."""
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if rising(mid) < target else (low, mid)
    return (low + high) / 2


def round_bytes(profile: str) -> float:
    """The byte model's round of `profile` at the published context."""
    parts = unit_bytes(
        profile, Phase.VERIFY, context_tokens=CONTEXT_TOKENS, config=LING_3_FLASH_CONFIG
    )
    return math.fsum(parts.values())


def saved_bytes(rows: int) -> float:
    """The bytes a stack round no longer reads (or writes as logits) with a hot head of
    `rows` rows: the byte model's saving at ROWS, scaled by the rows cut (it is linear in
    them)."""
    vocab = int(LING_3_FLASH_CONFIG["vocab_size"])
    saved = round_bytes("stack") - round_bytes("stack+hot-vocab")
    return saved * (vocab - rows) / (vocab - ROWS)


@dataclass(frozen=True, slots=True)
class HotRow:
    """One hot head size on the Spark, against the stack's round."""

    rows: int
    saved_gb: float
    round_ms: float
    stack_round_ms: float
    break_even_coverage: float
    """The least coverage at which its TPOT matches the stack's."""
    tpot_ms: dict[str, float]
    """TPOT at each coverage (as text, 0.90 to 1.00)."""
    stack_tpot_ms: float


def project(
    bandwidth_gbps: float, accept: float = PUBLISHED_ACCEPT, sizes: Sequence[int] = SIZES
) -> tuple[HotRow, ...]:
    """Each hot head's Spark round and TPOT over coverage, and its break-even coverage."""
    p = per_draft_acceptance(accept)
    stack_bytes = round_bytes("stack")
    stack_ms = stack_bytes / (bandwidth_gbps * 1e6)
    rows = []
    for n in sizes:
        saved = saved_bytes(n)
        round_ms = (stack_bytes - saved) / (bandwidth_gbps * 1e6)
        need = accept * round_ms / stack_ms
        rows.append(
            HotRow(
                rows=n,
                saved_gb=saved / 1e9,
                round_ms=round_ms,
                stack_round_ms=stack_ms,
                break_even_coverage=_solve(lambda c: accept_length(p, c), need),
                tpot_ms={
                    f"{c:.2f}": round_ms / accept_length(p, c)
                    for c in (0.90, 0.95, 0.97, 0.98, 0.99, 1.00)
                },
                stack_tpot_ms=stack_ms / accept,
            )
        )
    return tuple(rows)
