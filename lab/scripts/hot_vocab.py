"""The hot-vocabulary draft head's list, its coverage, and its Spark projection.

    python lab/scripts/hot_vocab.py build --tokenizer MODEL_DIR --corpus FILE... \\
        [--out app/levers/draft/hot_vocab_ids.json] [--keep 65536]
    python lab/scripts/hot_vocab.py coverage --tokenizer MODEL_DIR --list LIST --corpus FILE... \\
        [--out lab/results/DATE-hot-vocab-coverage.json]
    python lab/scripts/hot_vocab.py project [--fit SPARK_PROJECTION.json] [--accept 2.68] \\
        [--out lab/results/DATE-hot-vocab-projection.json]

`build` and `coverage` read MODEL_DIR's tokenizer.json with the `tokenizers` package (the
engine extra brings it) and its config.json's `vocab_size` (the head's rows); a corpus file
is JSON lines (GSM8K's `question` and `answer`, or `text`/`content`) or plain text.
Coverage on the corpus the list was built from is in-sample: the JSON says so. `project`
needs no tokenizer: its coverage is a parameter (a projection, not a measurement).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from dataclasses import asdict
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.levers.draft.hot_list import HotList, read  # noqa: E402
from app.levers.draft.hot_vocab import LIST  # noqa: E402
from lab.research import hot_vocab  # noqa: E402

RESULTS = Path(__file__).resolve().parents[1] / "results"
FIT = RESULTS / "2026-12-02-spark-projection-levers-session17.json"
"""The latest Spark projection whose fit (bandwidth, fixed cost held at 0) prices a round."""


def tokenizer(folder: Path) -> tuple[Any, int, str]:
    """The folder's tokenizer, the head's rows (config.json's `vocab_size`), and the digest
    of its tokenizer.json."""
    from tokenizers import Tokenizer

    path = folder / "tokenizer.json"
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return Tokenizer.from_file(str(path)), int(config["vocab_size"]), _sha256(path)


def counted(tok: Any, corpus: list[Path]) -> tuple[Counter[int], int]:
    """Token counts over every text of the corpus files, and how many texts."""
    found = [text for path in corpus for text in hot_vocab.texts(path)]
    ids = (enc.ids for enc in tok.encode_batch(found, add_special_tokens=False))
    return hot_vocab.count(ids), len(found)


def build(args: argparse.Namespace) -> int:
    tok, vocab, digest = tokenizer(args.tokenizer)
    counts, n_texts = counted(tok, args.corpus)
    specials = sorted(i for i, t in tok.get_added_tokens_decoder().items() if t.special)
    ranked = hot_vocab.rank(counts, vocab, specials)
    corpus = ", ".join(f"{p.name} ({_sha256(p)[:12]})" for p in args.corpus)
    listed = HotList(
        ids=ranked[: args.keep],
        vocab_size=vocab,
        tokenizer_sha256=digest,
        corpus=f"{corpus}: {n_texts} texts, {sum(counts.values())} tokens, "
        f"{len(counts)} distinct; then unseen ids in id order",
    )
    args.out.write_text(listed.to_json(), encoding="utf-8")
    print(f"wrote {args.out}: {len(listed.ids)} ids; {listed.corpus}")
    return 0


def coverage(args: argparse.Namespace) -> int:
    tok, vocab, digest = tokenizer(args.tokenizer)
    listed = read(args.list)
    if listed.tokenizer_sha256 != digest:
        print("error: the list was counted with another tokenizer.json", file=sys.stderr)
        return 2
    rows = []
    for path in args.corpus:
        counts, n_texts = counted(tok, [path])
        rows.append(
            {
                "corpus": path.name,
                "sha256": _sha256(path),
                "texts": n_texts,
                "tokens": sum(counts.values()),
                "in_sample": path.name in listed.corpus,
                "coverage": {
                    str(n): hot_vocab.coverage(counts, listed.top(n, vocab))
                    for n in hot_vocab.SIZES
                    if n <= len(listed.ids)
                },
            }
        )
        shown = ", ".join(f"{n}: {c:.4f}" for n, c in rows[-1]["coverage"].items())
        print(f"{path.name} ({rows[-1]['tokens']} tokens): {shown}")
    out = args.out or RESULTS / f"{date.today()}-hot-vocab-coverage.json"
    result = {"kind": "measurement", "list": str(args.list), "tokenizer_sha256": digest}
    out.write_text(json.dumps({**result, "corpora": rows}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


def project(args: argparse.Namespace) -> int:
    fit = json.loads(args.fit.read_text(encoding="utf-8"))["fit"]
    rows = hot_vocab.project(fit["bandwidth_gbps"], args.accept)
    print(
        f"PROJECTION, not a measurement: Spark round at {fit['bandwidth_gbps']:.1f} GB/s "
        f"(fit of {args.fit.name}), stack accept {args.accept} (p = "
        f"{hot_vocab.per_draft_acceptance(args.accept):.3f}); a hot row's acceptance is p * c"
    )
    for r in rows:
        tpot = ", ".join(f"c {c}: {ms:.2f}" for c, ms in r.tpot_ms.items())
        print(
            f"{r.rows:>6} rows: {r.saved_gb:.3f} GB less, round {r.round_ms:.2f} ms against "
            f"{r.stack_round_ms:.2f}; break-even coverage {r.break_even_coverage:.3f}; "
            f"TPOT ms {tpot} (stack {r.stack_tpot_ms:.2f})"
        )
    out = args.out or RESULTS / f"{date.today()}-hot-vocab-projection.json"
    result = {
        "kind": "projection",
        "note": "Not a measurement, and coverage is not measured: a Spark round's bytes from "
        "the byte model at the published context, read at the fitted bandwidth (fixed cost "
        "held at 0); acceptance a = sum of (p*c)^i over the 3 drafts and the bonus, p from "
        "the stack's accept length, c the hot list's coverage, a parameter here.",
        "fit": str(args.fit.name),
        "bandwidth_gbps": fit["bandwidth_gbps"],
        "context_tokens": hot_vocab.CONTEXT_TOKENS,
        "stack_accept_length": args.accept,
        "per_draft_acceptance": hot_vocab.per_draft_acceptance(args.accept),
        "rows": [asdict(r) for r in rows],
    }
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="rank the tokenizer's ids by count over a corpus")
    b.add_argument("--tokenizer", type=Path, required=True, help="a folder with tokenizer.json")
    b.add_argument("--corpus", type=Path, nargs="+", required=True)
    b.add_argument("--out", type=Path, default=LIST)
    b.add_argument("--keep", type=int, default=max(hot_vocab.SIZES))
    c = sub.add_parser("coverage", help="the share of each corpus's tokens in the hot list")
    c.add_argument("--tokenizer", type=Path, required=True)
    c.add_argument("--list", type=Path, default=LIST)
    c.add_argument("--corpus", type=Path, nargs="+", required=True)
    c.add_argument("--out", type=Path)
    p = sub.add_parser("project", help="the Spark round and TPOT over coverage")
    p.add_argument("--fit", type=Path, default=FIT)
    p.add_argument("--accept", type=float, default=hot_vocab.PUBLISHED_ACCEPT)
    p.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    return {"build": build, "coverage": coverage, "project": project}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
