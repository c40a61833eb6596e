"""The hot-vocabulary patch's parts that need no torch: the refusal without a list (before
anything loads), the wrap that builds the head after SGLang's (and sharing's) init of the
draft's head, and the logits route that hands the draft's processor the hot head whatever
head the model passes. Slicing and the self-test need torch: tests/gpu/test_hot_vocab_gpu.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.backend.engine.patches import hot_vocab
from app.backend.engine.patches.boundary import REFUSAL
from app.levers.draft.hot_list import HotList
from app.levers.draft.hot_vocab import HEAD_ATTR, LIST, ROWS


def test_no_hot_list_is_a_one_line_refusal_of_the_hot_vocab_line(tmp_path: Path):
    with pytest.raises(RuntimeError) as err:
        hot_vocab.load(tmp_path / "none.json")
    found = REFUSAL.search(str(err.value))
    assert found is not None and found.group(1) == "hot_vocab"
    assert "no hot-vocabulary list at" in found.group(2) and "\n" not in found.group(2)


def test_the_scheduler_reads_the_list_the_lever_ships():
    assert hot_vocab.SOURCE == LIST and LIST.parent.name == "draft"


def test_a_list_shorter_than_the_head_s_rows_is_refused(tmp_path: Path):
    path = tmp_path / "hot.json"
    path.write_text(HotList((1, 2), 157184, "0" * 64, "c").to_json(), encoding="utf-8")
    with pytest.raises(RuntimeError, match=f"holds 2 ids, the head needs {ROWS}"):
        hot_vocab.load(path)


def test_a_fitting_list_loads_with_the_digest_of_its_file(tmp_path: Path):
    path = tmp_path / "hot.json"
    listed = HotList(tuple(range(ROWS)), 157184, "0" * 64, "c")
    path.write_text(listed.to_json(), encoding="utf-8")
    found, digest = hot_vocab.load(path)
    assert found == listed and len(digest) == 64


def test_the_head_is_built_after_sglang_s_own_init_of_the_draft_s_head(monkeypatch):
    order: list[str] = []

    class Worker:
        def init_lm_head(self) -> None:
            order.append("stock")

    def attach(worker: Any, listed: Any, digest: str) -> None:
        order.append(f"hot {listed} {digest}")

    monkeypatch.setattr(hot_vocab, "attach", attach)
    stock = Worker.init_lm_head
    hot_vocab.wrap(Worker, ("listed", "digest"))
    Worker().init_lm_head()
    assert order == ["stock", "hot listed digest"]
    assert Worker.init_lm_head.__wrapped__ is stock


def test_the_draft_s_logits_processor_reads_the_hot_head_whatever_head_it_is_passed():
    calls: list[tuple[Any, ...]] = []
    processor = SimpleNamespace(forward=lambda *args, **kw: calls.append((*args, kw)))
    hot, shared = object(), object()
    hot_vocab.route(processor, hot)
    processor.forward("ids", "states", shared, "batch", aux=None)
    assert calls == [("ids", "states", hot, "batch", {"aux": None})]
    assert getattr(processor.forward, HEAD_ATTR) is hot


def test_without_a_live_hot_head_nothing_compares_equal():
    assert hot_vocab.compare(None, object()) == {
        "rows_equal": False,
        "scales_equal": False,
        "distinct_storage": False,
    }
