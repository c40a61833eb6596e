"""The NEXTN draft takes the target's whole head module, and a draft that does not is refused."""

from __future__ import annotations

from typing import Any

import pytest

from app.backend.engine.patches.boundary import REFUSAL
from app.backend.engine.patches.sharing import (
    check_draft_head,
    install_check,
    set_lm_head_from_target,
)
from tests.fixtures.sglang_objects import TensorDouble, of_class, stack_scheduler


def draft_worker() -> Any:
    """The stack's EagleDraftWorker, its draft sharing the target's head module."""
    return stack_scheduler().draft_worker.draft_worker


def own_head(weight: TensorDouble | None) -> Any:
    """A draft head module of its own, as stock SGLang leaves it (the weight maybe shared)."""
    return of_class(
        "ParallelLMHead", quant_method=of_class("UnquantizedLinearMethod"), weight=weight
    )


def test_a_draft_sharing_the_target_head_module_passes():
    check_draft_head(draft_worker())


def test_a_draft_reading_the_fp8_weight_through_its_own_method_is_refused():
    worker = draft_worker()
    target_head = worker.target_worker.model_runner.model.lm_head
    worker.draft_runner.model.lm_head = own_head(target_head.weight)
    with pytest.raises(RuntimeError) as raised:
        check_draft_head(worker)
    found = REFUSAL.search(str(raised.value))
    assert found is not None
    key, message = found.groups()
    assert key == "shared_head"
    assert "target head method LingFp8LMHeadMethod" in message
    assert "the draft reads torch.float8_e4m3fn [2560, 157184] through its own method" in message


def test_a_draft_head_without_a_weight_is_refused_saying_it_reads_nothing():
    worker = draft_worker()
    worker.draft_runner.model.lm_head = own_head(None)
    with pytest.raises(RuntimeError, match="the draft reads nothing"):
        check_draft_head(worker)


@pytest.mark.parametrize("tied", [False, True])
def test_the_draft_takes_the_target_module_unless_its_head_is_tied(tied):
    worker = draft_worker()
    draft = worker.draft_runner.model
    draft.lm_head = own_head(None)
    draft.config.tie_word_embeddings = tied
    target_head = worker.target_worker.model_runner.model.lm_head
    set_lm_head_from_target(draft, target_head)
    assert (draft.lm_head is target_head) is not tied


class StockDraftWorkerDouble:
    """SGLang's EagleDraftWorker: `init_lm_head` shares what the draft class lets it."""

    def __init__(self, worker: Any, share_module: bool):
        self.target_worker = worker.target_worker
        self.draft_runner = worker.draft_runner
        self.share_module = share_module
        self.draft_runner.model.lm_head = own_head(None)

    def init_lm_head(self) -> None:
        target_head = self.target_worker.model_runner.model.lm_head
        draft = self.draft_runner.model
        if self.share_module:
            set_lm_head_from_target(draft, target_head)
        else:  # stock 0.5.23's set_embed_and_head: the weight tensor only
            draft.lm_head.weight = target_head.weight


def test_the_installed_check_runs_after_sglang_shares_the_head():
    class Worker(StockDraftWorkerDouble):
        pass

    stock = Worker.init_lm_head
    install_check(Worker)
    assert Worker.init_lm_head.__wrapped__ is stock
    Worker(draft_worker(), share_module=True).init_lm_head()
    with pytest.raises(RuntimeError, match=r"LING_CHAT_REFUSED\[shared_head\]"):
        Worker(draft_worker(), share_module=False).init_lm_head()
