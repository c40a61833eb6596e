"""Test-only scheduler entry: ling-chat's patches, known-answer weights, deliberate breakage.

Only GPU tests name this module (through `EngineBackend(scheduler_entry=...)`); the
product's engine always runs `app.backend.engine.patches.run_scheduler_process`, so none of
this can be active in a normal run.

Environment (set by the test before the engine starts; spawned children inherit it):
- LING_CHAT_TEST_KNOWN_ANSWER=1: overwrite the dummy weights (see models.py); `target`: the
  target's only, the NEXTN draft keeps its dummy weights (its drafts are then rejected);
- LING_CHAT_TEST_LIVE_KDA=1: with known-answer weights, the KDA layers keep their inputs and
  lose only their output, so their state follows the tokens while the answer stays known;
- LING_CHAT_TEST_KDA_STATE_DIR: save each released request's KDA state there (`save_kda_states`);
- LING_CHAT_TEST_BREAKAGE: one of BREAKAGES, undoing part of ling-chat's changes;
- LING_CHAT_TEST_HOT_IDS: the hot list the hot-vocabulary draft head reads instead of the
  shipped one (the known answer's tokens, some or all of them hot).
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import torch

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from tests.gpu import models

KNOWN_ANSWER_ENV = "LING_CHAT_TEST_KNOWN_ANSWER"
LIVE_KDA_ENV = "LING_CHAT_TEST_LIVE_KDA"
KDA_STATE_DIR_ENV = "LING_CHAT_TEST_KDA_STATE_DIR"
BREAKAGE_ENV = "LING_CHAT_TEST_BREAKAGE"
HOT_IDS_ENV = "LING_CHAT_TEST_HOT_IDS"
BREAKAGES = (
    "no_fp8_hook",  # the FP8 head hook is not installed
    "weight_only_share",  # stock SGLang: the draft gets the head weight tensor only
    "bf16_view_share",  # the draft reads the FP8 bytes as a BF16 [V, H] matrix
    "bf16_view_share_unguarded",  # the same, with ling-chat's sharing guard removed too
    "dspark_bf16_view",  # the DSpark draft gets a copy of the head reading FP8 bytes as BF16
)


def engine(
    model: Path,
    log_dir: Path,
    *,
    profile: str = "stack",
    min_accept_length: float,
    overrides: dict[str, Any] | None = None,
) -> EngineBackend:
    """The GPU tests' engine on `model` through this entry: dummy weights (which the
    environment above may overwrite), the context and memory fraction of models.py."""
    config = EngineConfig(
        model_path=str(model),
        profile=profile,
        mem_fraction=models.mem_fraction(),
        log_dir=log_dir,
        min_accept_length=min_accept_length,
        context_length=models.CONTEXT,
        overrides={"load_format": "dummy", **(overrides or {})},
    )
    return EngineBackend(config, scheduler_entry=run_scheduler_process)


def run_scheduler_process(*args: Any, **kwargs: Any) -> None:
    """Like the product's entry, plus the test's weights and breakage."""
    from app.backend.engine import patches
    from app.backend.engine.patches.boundary import PatchPlan

    plan = PatchPlan.from_env()
    patches.redirect_output(plan.log_file)
    patches.ignore_hang_up()
    if hot := os.environ.get(HOT_IDS_ENV):
        from app.backend.engine.patches import hot_vocab

        hot_vocab.SOURCE = Path(hot)
    patches.install(plan)
    known = os.environ.get(KNOWN_ANSWER_ENV)
    if known in ("1", "target"):
        install_known_answer(draft=known == "1")
    if state_dir := os.environ.get(KDA_STATE_DIR_ENV):
        save_kda_states(Path(state_dir))
    breakage = os.environ.get(BREAKAGE_ENV)
    if breakage:
        break_it(breakage)
    from sglang.srt.managers.scheduler import run_scheduler_process as stock

    stock(*args, **kwargs)


def install_known_answer(*, draft: bool = True) -> None:
    """Write the known-answer weights after load, before the FP8 head is quantized (the
    draft's too, unless `draft` is false)."""
    from sglang.srt.models.bailing_moe_nextn import BailingMoeForCausalLMNextN
    from sglang.srt.models.bailing_moe_v3 import BailingMoeV3ForCausalLM

    product_hook = getattr(BailingMoeV3ForCausalLM, "precompile_kernels_after_loading", None)

    def target_hook(self: Any) -> None:
        write_target(self)
        if product_hook is not None:
            product_hook(self)

    BailingMoeV3ForCausalLM.precompile_kernels_after_loading = target_hook
    if draft:
        BailingMoeForCausalLMNextN.precompile_kernels_after_loading = write_draft


@torch.no_grad()
def write_target(model: Any) -> None:
    """Embeddings E (unit-RMS rows), head[P(x)] = E[x], sublayers silenced by zero norms."""
    embed = model.model.word_embeddings.weight
    gen = torch.Generator(device=embed.device).manual_seed(1234)
    table = torch.randn(embed.shape, generator=gen, device=embed.device, dtype=torch.float32)
    table = (table / table.pow(2).mean(-1, keepdim=True).sqrt()).to(embed.dtype)
    embed.copy_(table)
    perm = torch.tensor(models.permutation(), device=embed.device)
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(perm.numel(), device=embed.device)
    model.lm_head.weight.copy_(table[inverse])
    _zero_sublayer_norms(model)
    if os.environ.get(LIVE_KDA_ENV) == "1":
        _live_kda(model)
    model.model.norm.weight.fill_(1.0)


LIVE_KDA_DT_BIAS = -3.0
"""With the safe gate (lower bound -5) and dummy gate weights, each step keeps exp(-5 *
sigmoid(dt_bias)) of the KDA state: 0.08 at the dummy dt_bias 0, 0.79 at -3, so that a
verify round's first token and the state before the round still weigh in."""


def _live_kda(model: Any) -> None:
    """Each KDA layer reads the token's embedding (input norm 1) and adds nothing to the
    residual (its output projection 0): its state follows the tokens, the answer stays."""
    from sglang.srt.models.bailing_moe_v3 import BailingKDA

    for layer in model.model.layers:
        if isinstance(getattr(layer, "attention", None), BailingKDA):
            layer.input_layernorm.weight.fill_(1.0)
            layer.attention.dt_bias.fill_(LIVE_KDA_DT_BIAS)
            out = layer.attention.o_proj.weight  # FP8 (a byte a value: zero the bytes) or BF16
            (out.view(torch.uint8) if out.element_size() == 1 else out).zero_()


def save_kda_states(folder: Path) -> None:
    """Save each request's KDA state as SGLang releases it (before the tree caches or frees
    it) to `folder`/NNN-TOKENS.pt: NNN counts releases, TOKENS is the request's output
    tokens. Each file is a dict: `temporal`, the mamba pool's FP32 state [KDA layers,
    heads, V, K], and `conv`, its first conv state, both at `slot`, the slot the KDA kernels
    index (the request's row of the pool's request-to-slot map). A record that could not be
    read holds its `error` instead."""
    from sglang.srt.managers.scheduler_components import batch_result_processor

    stock = batch_result_processor.release_kv_cache
    releases = itertools.count()

    def release_kv_cache(req: Any, tree_cache: Any, **kwargs: Any) -> Any:
        owner = tree_cache.req_to_token_pool
        pool = getattr(owner, "mamba_pool", None)
        if pool is not None and req.kv.holds_mamba:
            torch.cuda.synchronize()
            try:
                record = _kda_release(owner, pool.mamba_cache, req)
            except Exception as exc:  # the test reports it; the scheduler runs on
                record = {"error": f"{type(exc).__name__}: {exc}"}
            folder.mkdir(parents=True, exist_ok=True)
            torch.save(record, folder / f"{next(releases):03d}-{len(req.output_ids)}.pt")
        return stock(req, tree_cache, **kwargs)

    batch_result_processor.release_kv_cache = release_kv_cache


def _kda_release(owner: Any, cache: Any, req: Any) -> dict[str, Any]:
    """`save_kda_states`' record of one request, read from the mamba pool's `cache`."""
    row = torch.tensor([req.kv.req_pool_idx], device=cache.temporal.device)
    slot = int(owner.translate_mamba_indices(owner.get_mamba_indices(row))[0])
    return {
        "temporal": cache.temporal[:, slot].float().cpu(),
        "conv": cache.conv[0][:, slot].float().cpu(),
        "slot": slot,
    }


@torch.no_grad()
def write_draft(model: Any) -> None:
    """NEXTN predicts P(next token): eh_proj = [I | 0], unit norms, silent decoder."""
    inner = model.model
    for norm in (inner.enorm, inner.hnorm, inner.final_layernorm):
        norm.weight.fill_(1.0)
    weight = inner.eh_proj.weight
    weight.zero_()
    weight[:, : weight.shape[0]].copy_(torch.eye(weight.shape[0], dtype=weight.dtype))
    _zero_sublayer_norms(model)


def _zero_sublayer_norms(model: Any) -> None:
    for name, module in model.named_modules():
        if name.endswith(("input_layernorm", "post_attention_layernorm")):
            module.weight.zero_()


def break_it(breakage: str) -> None:
    """Undo one of ling-chat's changes, the way a stock or careless stack would."""
    from sglang.srt.models.bailing_moe_nextn import BailingMoeForCausalLMNextN
    from sglang.srt.models.bailing_moe_v3 import BailingMoeV3ForCausalLM
    from sglang.srt.speculative.eagle_worker_v2 import EagleDraftWorker

    if breakage not in BREAKAGES:
        raise ValueError(f"unknown breakage {breakage!r}")
    if breakage == "no_fp8_hook":
        if os.environ.get(KNOWN_ANSWER_ENV) == "1":
            BailingMoeV3ForCausalLM.precompile_kernels_after_loading = write_target
        else:
            del BailingMoeV3ForCausalLM.precompile_kernels_after_loading
        return
    if breakage == "dspark_bf16_view":
        _dspark_bf16_view()
        return
    del BailingMoeForCausalLMNextN.set_lm_head_from_target
    if breakage.startswith("bf16_view_share"):
        stock = BailingMoeForCausalLMNextN.set_embed_and_head

        def set_embed_and_head(self: Any, embed: Any, head: Any) -> None:
            stock(self, embed, torch.nn.Parameter(_misread(head), requires_grad=False))

        BailingMoeForCausalLMNextN.set_embed_and_head = set_embed_and_head
    if breakage == "bf16_view_share_unguarded":
        EagleDraftWorker.init_lm_head = EagleDraftWorker.init_lm_head.__wrapped__


def _misread(head: Any) -> Any:
    """The FP8 head's bytes read as a BF16 [V, H] matrix."""
    fp8_rows = head.t().contiguous().view(torch.uint8)  # [V, H] bytes, row-major
    misread = torch.zeros(fp8_rows.shape, dtype=torch.bfloat16, device=head.device)
    misread.view(torch.uint8)[:, : fp8_rows.shape[1]].copy_(fp8_rows)
    return misread


def _dspark_bf16_view() -> None:
    """The DSpark draft gets its own head module: the FP8 bytes as BF16, an unquantized method."""
    import copy

    from sglang.srt.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
    from sglang.srt.models.dspark import DSparkDraftMixin

    stock = DSparkDraftMixin.attach_shared_modules

    def attach_shared_modules(self: Any, *, embed_tokens: Any, lm_head: Any) -> None:
        view = copy.copy(lm_head)
        view._parameters = dict(lm_head._parameters)
        view.weight = torch.nn.Parameter(_misread(lm_head.weight), requires_grad=False)
        view.quant_method = UnquantizedEmbeddingMethod()
        stock(self, embed_tokens=embed_tokens, lm_head=view)

    DSparkDraftMixin.attach_shared_modules = attach_shared_modules
