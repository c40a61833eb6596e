"""The hot list from counts, its coverage, the acceptance model, the Spark projection, and
the script's three commands over a stand-in tokenizer (the real one is not reachable here)."""

from __future__ import annotations

import importlib.util
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.levers.draft.hot_list import HotList, read
from lab.research import hot_vocab

ROOT = Path(__file__).resolve().parents[2]
GSM8K = ROOT / "tests" / "fixtures" / "gsm8k_train_small.jsonl"


def test_the_list_puts_specials_first_then_counts_then_unseen_ids_in_order():
    counts = Counter({7: 5, 3: 5, 9: 1})
    assert hot_vocab.rank(counts, 10, first=(1, 9)) == (1, 9, 3, 7, 0, 2, 4, 5, 6, 8)


def test_coverage_is_the_share_of_tokens_that_are_hot():
    counts = hot_vocab.count([[1, 1, 2], [3]])
    assert hot_vocab.coverage(counts, {1}) == 0.5
    assert hot_vocab.coverage(counts, {1, 2, 3}) == 1.0
    assert hot_vocab.coverage(Counter(), {1}) == 1.0


def test_a_jsonl_corpus_counts_its_questions_and_answers():
    found = hot_vocab.texts(GSM8K)
    assert len(found) == 10 and found[0].startswith("Tom has 4 red balls")


def test_acceptance_keeps_p_times_coverage_a_draft():
    assert hot_vocab.accept_length(1.0) == 4.0
    assert hot_vocab.accept_length(0.5, 1.0) == pytest.approx(1.875)
    assert hot_vocab.accept_length(1.0, 0.5) == pytest.approx(1.875)
    assert hot_vocab.per_draft_acceptance(2.68) == pytest.approx(0.737, abs=1e-3)
    with pytest.raises(ValueError, match="1 to 4"):
        hot_vocab.per_draft_acceptance(4.5)


def test_the_projection_prices_the_byte_model_s_saving_and_the_coverage_it_needs():
    rows = {r.rows: r for r in hot_vocab.project(200.0)}
    assert rows[32768].saved_gb == pytest.approx(0.958, abs=5e-4)
    assert rows[16384].saved_gb > rows[32768].saved_gb > rows[65536].saved_gb
    for r in rows.values():
        assert r.round_ms < r.stack_round_ms
        assert r.tpot_ms["1.00"] < r.stack_tpot_ms  # every token hot: faster
        # at break-even the hot head's TPOT is the stack's
        a = hot_vocab.accept_length(hot_vocab.per_draft_acceptance(2.68), r.break_even_coverage)
        assert r.round_ms / a == pytest.approx(r.stack_tpot_ms)
    assert 0.88 < rows[32768].break_even_coverage < 0.92


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "hot_vocab_script", ROOT / "lab/scripts/hot_vocab.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WordTokenizer:
    """A stand-in for `tokenizers.Tokenizer`: each word an id of a small vocabulary."""

    def __init__(self, vocab: list[str]):
        self.ids = {w: i for i, w in enumerate(vocab)}

    def encode_batch(self, texts: list[str], add_special_tokens: bool) -> list[Any]:
        return [SimpleNamespace(ids=[self.ids.get(w, 0) for w in t.split()]) for t in texts]

    def get_added_tokens_decoder(self) -> dict[int, Any]:
        return {1: SimpleNamespace(special=True), 2: SimpleNamespace(special=False)}


def test_build_then_coverage_over_a_stand_in_tokenizer(tmp_path: Path, monkeypatch):
    script = _script()
    vocab = ["[UNK]", "<eos>", "x", *sorted({w for t in hot_vocab.texts(GSM8K) for w in t.split()})]
    monkeypatch.setattr(script, "tokenizer", lambda folder: (WordTokenizer(vocab), 70000, "d" * 64))
    out = tmp_path / "hot.json"
    argv = ["build", "--tokenizer", str(tmp_path), "--corpus", str(GSM8K), "--out", str(out)]
    assert script.main(argv) == 0
    listed = read(out)
    assert listed.ids[0] == 1 and len(listed.ids) == 65536 and listed.vocab_size == 70000
    assert "gsm8k_train_small.jsonl" in listed.corpus and "10 texts" in listed.corpus
    result = tmp_path / "coverage.json"
    argv = ["coverage", "--tokenizer", str(tmp_path), "--list", str(out), "--corpus", str(GSM8K)]
    assert script.main([*argv, "--out", str(result)]) == 0
    (row,) = json.loads(result.read_text())["corpora"]
    assert row["in_sample"] and row["coverage"] == {"16384": 1.0, "32768": 1.0, "65536": 1.0}


def test_coverage_refuses_a_list_of_another_tokenizer(tmp_path: Path, monkeypatch, capsys):
    script = _script()
    monkeypatch.setattr(script, "tokenizer", lambda folder: (WordTokenizer([]), 10, "e" * 64))
    listed = tmp_path / "hot.json"
    listed.write_text(HotList((1,), 10, "d" * 64, "c").to_json())
    argv = ["coverage", "--tokenizer", str(tmp_path), "--list", str(listed), "--corpus", str(GSM8K)]
    assert script.main(argv) == 2
    assert "another tokenizer.json" in capsys.readouterr().err


def test_project_writes_a_projection_not_a_measurement(tmp_path: Path):
    out = tmp_path / "p.json"
    assert _script().main(["project", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["kind"] == "projection" and "coverage is not measured" in result["note"]
    assert [r["rows"] for r in result["rows"]] == list(hot_vocab.SIZES)
