"""DSpark evidence, read in SGLang's scheduler (GPU only; judged by app/backend/proof/dspark.py).

No patch makes the draft use the FP8 head: in SGLang 0.5.23 `DSparkWorkerV2` hands the
draft the target's `lm_head` module itself (`attach_shared_modules`), and
`project_through_lm_head` (models/dspark.py) calls that module's `quant_method.apply`
whenever `should_apply_lm_head_quant_method` says so, which it does for any method
that is not one of SGLang's unquantized or ModelOpt ones: ling-chat's FP8 method runs.
What is recorded here proves it on the live model.

SGLang attributes read: `scheduler.draft_worker` (`DSparkWorkerV2`): `.draft_model`
(`embed_tokens`, `lm_head`, `layers`, `markov_head`, `block_size`), `.gamma`,
`.verify_num_draft_tokens`, `._resolve_target_embed_tokens` (the embedding SGLang
shares), `.draft_model_runner.decode_cuda_graph_runner`; the draft's layers' linears
(`quant_method`, `weight`: SGLang's `speculative_draft_model_quantization` reaches them,
not the draft's `fc` or Markov head, which are plain torch linears); the target runner's
`decode_cuda_graph_runner` (its ReplaySSM verify: app/backend/engine/patches/replayssm.py).
Wrapped: `models.dspark.project_through_lm_head`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.backend.engine.patches.graph_runners import graph_runner

PROJECTIONS: Counter[str] = Counter()
"""Draft head projections during graph capture, by the head's quant method."""
COUNTS: Counter[str] = Counter()
"""`fp8_calls_in_draft_capture`."""


def install() -> None:
    """Count the draft's head projections in capture."""
    import torch
    from sglang.srt.models import dspark

    from app.backend.engine.patches import fp8_head

    project = dspark.project_through_lm_head

    def project_through_lm_head(hidden: Any, lm_head: Any) -> Any:
        if not torch.cuda.is_current_stream_capturing():
            return project(hidden, lm_head)
        before = fp8_head.method_class().captured_calls
        out = project(hidden, lm_head)
        PROJECTIONS[type(getattr(lm_head, "quant_method", None)).__name__] += 1
        COUNTS["fp8_calls_in_draft_capture"] += fp8_head.method_class().captured_calls - before
        return out

    dspark.project_through_lm_head = project_through_lm_head


def is_dspark(spec: Any) -> bool:
    """Whether the scheduler's speculative worker is DSpark's."""
    return type(spec).__name__ == "DSparkWorkerV2"


def collect(scheduler: Any) -> dict[str, Any]:
    """The `dspark` fact (a raised error is reported by evidence.collect)."""
    from sglang.srt.layers.logits_processor import should_apply_lm_head_quant_method

    spec = scheduler.draft_worker
    runner = scheduler.tp_worker.model_runner
    target, draft = runner.model, spec.draft_model
    head = draft.lm_head
    return {
        "worker": type(spec).__name__,
        "draft_class": type(draft).__name__,
        "draft_layers": len(draft.layers),
        "markov_head": type(draft.markov_head).__name__,
        "gamma": spec.gamma,
        "verify_window": spec.verify_num_draft_tokens,
        "config_block_size": getattr(draft, "block_size", None),
        "head": {
            "is_target_head": head is target.lm_head,
            "embed_is_target_embed": draft.embed_tokens
            is spec._resolve_target_embed_tokens(target),
            "weight_dtype": str(head.weight.dtype).removeprefix("torch."),
            "quant_method": type(head.quant_method).__name__,
            "applies_quant_method": should_apply_lm_head_quant_method(head, head.quant_method),
        },
        "projections_captured": dict(PROJECTIONS),
        "fp8_calls_in_draft_capture": COUNTS["fp8_calls_in_draft_capture"],
        "graph_runners": {
            "target_verify": graph_runner(
                runner.decode_cuda_graph_runner, getattr(runner, "eager_runner", None)
            ),
            "draft_decode": graph_runner(
                spec.draft_model_runner.decode_cuda_graph_runner,
                getattr(spec.draft_model_runner, "eager_runner", None),
            ),
        },
    }


def draft_weights(draft: Any) -> dict[str, Any]:
    """The draft's layer linears by quant method and weight dtype, and the bytes of its own
    parameters by dtype (not the target's embedding and head, which it holds too)."""
    methods: Counter[str] = Counter()
    dtypes: Counter[str] = Counter()
    for _name, module in draft.layers.named_modules():
        method, weight = getattr(module, "quant_method", None), getattr(module, "weight", None)
        if method is None or weight is None:  # attention's KV-cache method has no weight
            continue
        methods[type(method).__name__] += 1
        dtypes[_dtype(weight)] += 1
    shared = {
        id(param)
        for module in (draft.lm_head, draft.embed_tokens)
        if module is not None
        for param in module.parameters()
    }
    own: Counter[str] = Counter()
    for param in draft.parameters():
        if id(param) not in shared:
            own[_dtype(param)] += param.numel() * param.element_size()
    return {
        "layer_linears": dict(methods),
        "layer_linear_dtypes": dict(dtypes),
        "own_bytes": dict(own),
    }


def _dtype(tensor: Any) -> str:
    return str(tensor.dtype).removeprefix("torch.")
