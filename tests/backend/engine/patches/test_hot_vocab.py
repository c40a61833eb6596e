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


def test_the_hot_rows_are_the_full_head_s_bytes_and_scales_and_compare_so():
    torch = pytest.importorskip("torch", reason="needs torch (the engine extra)")
    vocab, hidden = 16, 8
    rows = torch.randn(vocab, hidden).to(torch.float8_e4m3fn)  # row-major [V, K]
    full = SimpleNamespace(weight=rows.t(), weight_scale=torch.rand(vocab, 1))
    table = torch.tensor([5, 0, 9])
    hot, scale = hot_vocab.rows_at(full, table)
    assert torch.equal(hot, rows.view(torch.uint8)[[5, 0, 9]])
    assert torch.equal(scale, full.weight_scale[[5, 0, 9]])
    head = SimpleNamespace(weight=hot.view(rows.dtype).t(), weight_scale=scale, hot_ids=table)
    assert hot_vocab.compare(head, full) == dict.fromkeys(
        ("rows_equal", "scales_equal", "distinct_storage"), True
    )
    head.weight_scale = scale * 2
    assert hot_vocab.compare(head, full)["scales_equal"] is False
    head.hot_ids = torch.tensor([5, 1, 9])
    assert hot_vocab.compare(head, full)["rows_equal"] is False


class LingFp8LMHeadMethod:
    """ling-chat's FP8 head method stood in for on the CPU: x @ (FP8 rows * their scales).T."""

    @staticmethod
    def run(head: Any, x: Any) -> Any:
        rows = head.weight.t().float() * head.weight_scale.reshape(-1, 1)
        return x.float() @ rows.t()

    def apply(self, layer: Any, x: Any, bias: Any = None) -> Any:
        return self.run(layer, x)


def test_attach_gives_the_draft_s_logits_the_hot_slice_and_the_worker_its_ids(monkeypatch):
    torch = pytest.importorskip("torch", reason="needs torch (the engine extra)")
    from app.backend.engine.patches import fp8_head

    vocab, hidden = ROWS + 4096, 256
    rows = torch.randn(vocab, hidden, generator=torch.Generator().manual_seed(0))
    full = SimpleNamespace(
        weight=rows.to(torch.float8_e4m3fn).t(),
        weight_scale=torch.rand(vocab, 1) + 0.5,
        quant_method=LingFp8LMHeadMethod(),
    )
    kernel = SimpleNamespace(name="emulated", run=None, max_m=8)

    def choose(head: Any) -> Any:
        kernel.run = lambda x: LingFp8LMHeadMethod.run(head, x)
        return (kernel, kernel), {"emulated": {"1": 10.0, "4": 11.0}}

    monkeypatch.setattr(hot_vocab, "FACTS", {"installed": False})
    monkeypatch.setattr(hot_vocab, "method_class", lambda: None)
    monkeypatch.setattr(hot_vocab, "choose_kernel", choose)
    monkeypatch.setattr(fp8_head, "new_method", lambda cls: SimpleNamespace(small=None, large=None))
    passed: list[Any] = []
    processor = SimpleNamespace(forward=lambda ids, states, head, batch: passed.append(head))
    worker = SimpleNamespace(
        target_worker=SimpleNamespace(
            model_runner=SimpleNamespace(model=SimpleNamespace(lm_head=full))
        ),
        draft_runner=SimpleNamespace(model=SimpleNamespace(logits_processor=processor)),
    )
    ids = tuple(range(vocab - 1, vocab - 1 - ROWS, -1))  # the last rows, hottest first
    hot_vocab.attach(worker, HotList(ids, vocab, "0" * 64, "c"), "d" * 64)

    head = getattr(worker, HEAD_ATTR)
    assert worker.hot_token_id is head.hot_ids and head.hot_ids.tolist() == list(ids)
    assert list(head.weight.shape) == [hidden, ROWS] and head.weight.dtype == torch.float8_e4m3fn
    assert hot_vocab.compare(head, full) == dict.fromkeys(
        ("rows_equal", "scales_equal", "distinct_storage"), True
    )
    processor.forward("ids", "states", full, "batch")
    assert passed == [head]
    facts = hot_vocab.FACTS
    assert facts["installed"] and facts["rows"] == ROWS and facts["vocab"] == vocab
    assert facts["weight_shape"] == [hidden, ROWS] and facts["scale_shape"] == [ROWS, 1]
    assert facts["bytes_hot"] == ROWS * (hidden + 4)
    assert facts["selftest_cosine"] > 0.9999 and facts["selftest_top1"] == 1.0
    assert facts["kernel"] == "emulated" and facts["timing_us"]["hot"] == 10.0
