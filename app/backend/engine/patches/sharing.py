"""The NEXTN draft shares the target's whole LM-head module, and refuses anything less.

Stock SGLang 0.5.23 hands the Bailing NEXTN draft only the target's head *weight*
(`set_embed_and_head`). With an FP8 head the draft's own BF16 method then multiplies
by the FP8 tensor: a crash with SGLang's layout, silent garbage (accept length 1.00)
with others. `set_lm_head_from_target`, which SGLang's EAGLE worker calls when a draft
class has it, gives the draft the module itself, quant method and scales included.
"""

from __future__ import annotations

from typing import Any

from app.backend.engine.patches.boundary import PatchPlan, refusal


def set_lm_head_from_target(self: Any, target_lm_head: Any) -> None:
    """Use the target's head module as the draft's (untied heads only)."""
    if not getattr(self.config, "tie_word_embeddings", False):
        self.lm_head = target_lm_head


def check_draft_head(worker: Any) -> None:
    """Refuse (before any draft graph is captured) a draft head that is not the target's.

    Raises:
        RuntimeError: a `refusal`, read back by the app as a failed proof line.
    """
    target = worker.target_worker.model_runner.model
    draft = worker.draft_runner.model
    if draft.lm_head is target.lm_head:
        return
    method = type(getattr(target.lm_head, "quant_method", None)).__name__
    weight = getattr(draft.lm_head, "weight", None)
    reads = "nothing" if weight is None else f"{weight.dtype} {list(weight.shape)}"
    raise refusal(
        "shared_head",
        "the NEXTN draft's LM head is its own module, not the target's (target head "
        f"method {method}; the draft reads {reads} through its own method), so its "
        "drafts would be wrong",
    )


def install(plan: PatchPlan) -> None:
    """Give the Bailing NEXTN class whole-module sharing, and check it after sharing (the
    NEXTN lever's patch)."""
    from sglang.srt.models.bailing_moe_nextn import BailingMoeForCausalLMNextN
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

    BailingMoeForCausalLMNextN.set_lm_head_from_target = set_lm_head_from_target
    install_check(EagleDraftWorker)


def install_check(worker_cls: Any) -> None:
    """Run `check_draft_head` right after SGLang shares the draft's embedding and head."""
    stock = worker_cls.init_lm_head

    def init_lm_head(self: Any) -> None:
        stock(self)
        check_draft_head(self)

    init_lm_head.__wrapped__ = stock  # type: ignore[attr-defined]
    worker_cls.init_lm_head = init_lm_head
