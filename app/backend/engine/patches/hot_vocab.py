"""The hot-vocabulary draft head: the NEXTN draft's logits over the hot rows of the FP8 head.

Installed after `sharing` (the NEXTN lever's patch), around SGLang's
`EagleDraftWorker.init_lm_head`: once the draft holds the target's whole FP8 head module
(and sharing.py checked it), the rows of the hot list's top `ROWS` ids and their per-row
scales are copied out of it byte for byte (no re-quantization) into a head of their own,
with ling-chat's FP8 head method and the kernel fastest for its shape, timed in CUDA graphs
here. The draft model keeps the shared module (`draft.lm_head is target.lm_head`); only its
logits processor is handed the hot head, and the draft worker gets the id table as
`hot_token_id`, through which SGLang 0.5.23 maps each draft step's top-1 back to the full
vocabulary (`eagle_worker_v2.py`: `topk_index = self.hot_token_id[topk_index]`, and the
draft-extend graph's logits buffer sized from it). The target's verify reads the full head.
This runs before the draft's CUDA graphs are captured, so they capture the hot head.

No hot list, or one that does not fit the head: a refusal, before anything loads for a
missing file.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from app.backend.engine.patches import head_choice
from app.backend.engine.patches.boundary import PatchPlan, refusal
from app.levers.draft import hot_list
from app.levers.draft.hot_vocab import HEAD_ATTR, LIST, METHOD, ROWS
from app.levers.draft.hot_vocab import LINE as HOT_LINE
from app.levers.model.fp8_head import METHOD as FULL_METHOD

SOURCE: Path = LIST
"""The hot list this scheduler reads (the GPU tests' entry points it at a list of their own
before `install`)."""
FACTS: dict[str, Any] = {"installed": False}
"""What building the hot head found; read by the lever's fact reader."""
CALLS: Counter[str] = Counter()
"""The hot head's calls: `captured` in CUDA-graph capture, `eager` outside."""
SELFTEST_ROWS = 64
_method_cls: Any = None


def install(plan: PatchPlan) -> None:
    """Read the hot list (refused now if there is none) and build the draft's hot head right
    after SGLang shares the target's head with it (the hot-vocabulary lever's patch)."""
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

    wrap(EagleDraftWorker, load(SOURCE))


def load(path: Path) -> tuple[hot_list.HotList, str]:
    """The hot list at `path` and the digest of its file.

    Raises:
        RuntimeError: a `refusal`: no list there, a malformed one, or fewer than ROWS ids.
    """
    try:
        found = hot_list.read(path)
        found.top(ROWS, found.vocab_size)
    except hot_list.HotListError as err:
        raise refusal(HOT_LINE.key, str(err)) from None
    return found, hashlib.sha256(path.read_bytes()).hexdigest()


def wrap(worker_cls: Any, listed: tuple[hot_list.HotList, str]) -> None:
    """Build the hot head at the end of `worker_cls.init_lm_head`."""
    stock = worker_cls.init_lm_head

    def init_lm_head(self: Any) -> None:
        stock(self)
        attach(self, *listed)

    init_lm_head.__wrapped__ = stock  # type: ignore[attr-defined]
    worker_cls.init_lm_head = init_lm_head


def method_class() -> Any:
    """ling-chat's FP8 head method under its own name and call counters."""
    global _method_cls
    if _method_cls is not None:
        return _method_cls
    import torch

    from app.backend.engine.patches import fp8_head

    class HotMethod(fp8_head.method_class()):  # type: ignore[misc]
        captured_calls = 0
        eager_calls = 0
        captured_by_kernel: Counter[str] = Counter()

        def apply(self, layer: Any, x: Any, bias: Any = None) -> Any:
            CALLS["captured" if torch.cuda.is_current_stream_capturing() else "eager"] += 1
            return super().apply(layer, x, bias)

    HotMethod.__name__ = HotMethod.__qualname__ = METHOD
    _method_cls = HotMethod
    return _method_cls


def attach(worker: Any, listed: hot_list.HotList, digest: str) -> None:
    """Give the draft worker's model the hot head on its logits path, and the worker its ids.

    Raises:
        RuntimeError: a `refusal`: the target's head is not ling-chat's FP8 head, the list
            indexes another vocabulary, or no FP8 kernel runs the hot head.
    """
    import torch

    full = worker.target_worker.model_runner.model.lm_head
    method = type(getattr(full, "quant_method", None)).__name__
    if method != FULL_METHOD:
        raise refusal(HOT_LINE.key, f"the target's head runs {method}, not ling-chat's FP8 head")
    vocab = int(full.weight.shape[-1])
    try:
        ids = listed.top(ROWS, vocab)
    except hot_list.HotListError as err:
        raise refusal(HOT_LINE.key, str(err)) from None
    table = torch.tensor(ids, dtype=torch.int64, device=full.weight.device)
    head = sliced(full, table)
    chosen, timings = choose_kernel(head)
    head.quant_method.small, head.quant_method.large = chosen
    worker.hot_token_id = table
    setattr(worker, HEAD_ATTR, head)
    route(worker.draft_runner.model.logits_processor, head)
    FACTS.update(
        installed=True,
        rows=len(ids),
        vocab=vocab,
        list_file=str(SOURCE),
        list_sha256=digest,
        tokenizer_sha256=listed.tokenizer_sha256,
        corpus=listed.corpus,
        weight_dtype=str(head.weight.dtype).removeprefix("torch."),
        weight_shape=list(head.weight.shape),
        scale_shape=list(head.weight_scale.shape),
        bytes_hot=_bytes(head),
        bytes_full=_bytes(full),
        kernel=chosen[0].name,
        candidates_us=timings,
        timing_us={"hot": timings[chosen[0].name]["1"], "full": _full_us()},
        **selftest(full, head),
    )


def sliced(full: Any, table: Any) -> Any:
    """A head module of `full`'s rows at `table` (`rows_at`), its weight kept as `full`'s
    [K, N] view of row-major [N, K] storage, with ling-chat's FP8 head method."""
    import torch

    from app.backend.engine.patches import fp8_head

    rows, scale = rows_at(full, table)
    head = torch.nn.Module()
    head.weight = torch.nn.Parameter(rows.view(full.weight.dtype).t(), requires_grad=False)
    head.weight_scale = torch.nn.Parameter(scale.contiguous(), requires_grad=False)
    head.hot_ids = table
    head.quant_method = fp8_head.new_method(method_class())
    return head


def rows_at(full: Any, table: Any) -> tuple[Any, Any]:
    """`full`'s FP8 rows at `table` as bytes ([N, K] uint8, copied as they are: no
    re-quantization) and their per-row scales."""
    import torch

    rows = full.weight.t()  # the [V, K] row-major storage under the [K, V] view
    scale = full.weight_scale
    vocab_dim = _vocab_dim(scale, rows.shape[0])
    return rows.view(torch.uint8).index_select(0, table), scale.index_select(vocab_dim, table)


def compare(head: Any, full: Any) -> dict[str, bool]:
    """Whether the live hot head holds `full`'s bytes and scales at its ids, in storage of
    its own (read at proof time, after every graph was captured)."""
    if head is None:
        return {"rows_equal": False, "scales_equal": False, "distinct_storage": False}
    import torch

    rows, scale = rows_at(full, head.hot_ids)
    return {
        "rows_equal": torch.equal(head.weight.t().view(torch.uint8), rows),
        "scales_equal": torch.equal(head.weight_scale, scale),
        "distinct_storage": head.weight.data_ptr() != full.weight.data_ptr(),
    }


def _vocab_dim(scale: Any, vocab: int) -> int:
    """The dimension of the per-row scales that runs over the vocabulary."""
    dims = [d for d, n in enumerate(scale.shape) if n == vocab]
    if len(dims) != 1:
        raise refusal(HOT_LINE.key, f"the head's scales {list(scale.shape)} are not one a row")
    return dims[0]


def choose_kernel(head: Any) -> tuple[tuple[Any, Any], dict[str, dict[str, object]]]:
    """The fastest FP8 kernel for the hot head's shape (timed in CUDA graphs at M = 1 and 4,
    as the full head's are) and CUTLASS for longer inputs, with every candidate's times."""
    import torch

    from app.backend.engine.patches import fp8_head

    k = head.weight.shape[0]
    states = torch.randn((max(int(m) for m in fp8_head.TIMED), k), device=head.weight.device)
    states = states.to(torch.bfloat16)
    kernels = {kernel.name: kernel for kernel in fp8_head.candidates(head)}
    timings: dict[str, dict[str, object]] = {}
    for name, kernel in kernels.items():
        timings[name] = {}
        for m in fp8_head.TIMED:
            try:
                call = fp8_head._kernel_call(kernel, states[: int(m)])
                timings[name][m] = fp8_head.graph_time_us(call)
            except Exception as exc:  # a kernel this GPU cannot run is out, not fatal
                timings[name][m] = f"{type(exc).__name__}: {exc}"[:200]
    chosen = head_choice.pick(timings)
    if chosen is None:
        raise refusal(HOT_LINE.key, f"no FP8 kernel ran the hot head on this GPU: {timings}")
    return (kernels[chosen], kernels[fp8_head.CUTLASS]), timings


def selftest(full: Any, head: Any) -> dict[str, float]:
    """The hot head's chosen kernel against the full head at the hot ids: the least cosine
    over random hidden states, and how often the hot top-1 mapped back is the full top-1 on
    hidden states equal to hot rows (each its own token's clear winner)."""
    import torch

    from app.backend.engine.patches import fp8_head

    table = head.hot_ids
    gen = torch.Generator(device=table.device).manual_seed(0)
    k = head.weight.shape[0]
    random = torch.randn((SELFTEST_ROWS, k), device=table.device, generator=gen)
    scale = head.weight_scale.reshape(-1)[:SELFTEST_ROWS, None].float()
    own = head.weight.t()[:SELFTEST_ROWS].float() * scale
    own = own / own.pow(2).mean(-1, keepdim=True).sqrt().clamp_min(1e-12)
    states = torch.cat([random, own]).to(torch.bfloat16)
    hot = fp8_head._run_blocks(head.quant_method.small, states).float()
    whole = full.quant_method.apply(full, states).float()
    cosine = torch.nn.functional.cosine_similarity(hot, whole[:, table], dim=-1)
    mapped = table[hot[SELFTEST_ROWS:].argmax(-1)] == whole[SELFTEST_ROWS:].argmax(-1)
    return {
        "selftest_cosine": round(cosine.min().item(), 6),
        "selftest_top1": round(mapped.float().mean().item(), 4),
    }


def route(processor: Any, head: Any) -> None:
    """Make the draft's logits processor read `head` whatever head its model passes."""
    stock = processor.forward

    def forward(input_ids: Any, hidden_states: Any, lm_head: Any, *args: Any, **kw: Any) -> Any:
        return stock(input_ids, hidden_states, head, *args, **kw)

    setattr(forward, HEAD_ATTR, head)  # what the evidence reads: the head this forward passes
    object.__setattr__(processor, "forward", forward)  # an instance attribute, not a submodule


def _bytes(head: Any) -> int:
    return sum(t.numel() * t.element_size() for t in (head.weight, head.weight_scale))


def _full_us() -> object:
    """The full FP8 head's time at M = 1 with its own kernel (fp8_head.py's timing)."""
    from app.backend.engine.patches import fp8_head

    return fp8_head.FACTS.get("timing_us", {}).get("fp8", {}).get("1")
