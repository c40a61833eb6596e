"""The evidence the scheduler reports, collected over doubles of SGLang's objects, and the
verdicts the proof gives on it: the contract between the two, checked without a GPU."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from app.backend.engine.patches.evidence import collect
from app.backend.proof import build_report
from app.core.proof_report import ProofLine, Verdict
from app.levers.model.fp8_head import METHOD as FP8_HEAD_METHOD
from tests.fixtures.sglang_objects import (
    GEMV,
    HUMMING_CACHE,
    SourcesDouble,
    TensorDouble,
    humming_state,
    of_class,
    plain_scheduler,
    stack_scheduler,
)


def lines(facts: dict[str, Any], profile: str = "stack") -> dict[str, ProofLine]:
    report = build_report(facts, profile=profile, min_accept_length=1.5, warmup_accept_length=3.2)
    return {line.key: line for line in report.lines}


def test_a_healthy_stack_reports_json_ready_facts_on_which_every_line_passes():
    facts = collect(stack_scheduler(), SourcesDouble())
    assert json.loads(json.dumps(facts)) == facts
    assert {line.verdict for line in lines(facts).values()} == {Verdict.PASS}
    assert [layer["name"] for layer in facts["moe_target"]] == [
        f"model.layers.{i}.mlp.experts" for i in range(5)
    ]
    assert facts["head_target"]["quant_method"] == FP8_HEAD_METHOD
    assert facts["head_target"]["weight_dtype"] == "float8_e4m3fn"
    assert facts["fp8_head"]["captured_by_kernel"] == {GEMV: 4, "cutlass": 1}
    assert facts["speculative"] == {
        "worker": "EAGLEWorkerV2",
        "draft_worker": "EagleDraftWorker",
        "num_steps": 3,
        "topk": 1,
        "num_draft_tokens": 4,
    }
    assert facts["cuda_graphs"]["memory_gb"]["draft_extend"] == 0.0625


def test_without_speculation_the_draft_facts_are_absent_and_the_plain_profile_passes():
    facts = collect(plain_scheduler(), SourcesDouble())
    assert [facts[k] for k in ("moe_draft", "head_draft", "sharing", "speculative")] == [None] * 4
    assert sorted(facts["cuda_graphs"]["phases"]) == ["decode", "prefill"]
    judged = lines(facts, profile="humming+fp8")
    assert judged["nextn"].verdict is Verdict.OFF
    assert {line.verdict for line in judged.values()} <= {Verdict.PASS, Verdict.OFF}


def test_a_fact_that_cannot_be_read_is_its_error_and_the_others_are_still_collected():
    class NoCuda(SourcesDouble):
        def versions(self) -> dict[str, Any]:
            raise RuntimeError("no CUDA device")

    scheduler = stack_scheduler()
    del scheduler.draft_worker.draft_worker.draft_runner.model.model.word_embeddings
    facts = collect(scheduler, NoCuda())
    assert facts["versions"]["error"] == "RuntimeError: no CUDA device"
    assert "Traceback" in facts["versions"]["trace"]
    assert facts["sharing"]["error"].startswith("AttributeError: ")
    judged = lines(facts)
    assert judged["shared_head"].verdict is Verdict.FAIL
    assert judged["shared_head"].evidence.startswith("sharing: AttributeError")
    assert judged["humming"].verdict is Verdict.PASS


def test_a_draft_moe_layer_off_humming_fails_the_humming_line():
    facts = collect(stack_scheduler(draft_moe="UnquantizedFusedMoEMethod"), SourcesDouble())
    assert facts["moe_draft"][0]["quant_method"] == "UnquantizedFusedMoEMethod"
    assert facts["moe_draft"][0]["runner_core"] == "TritonRunnerCore"
    humming = lines(facts)["humming"]
    assert humming.verdict is Verdict.FAIL
    assert "5/6 MoE layers" in humming.evidence
    assert "(others: Mxfp4HummingMoEMethod, UnquantizedFusedMoEMethod)" in humming.evidence


def test_a_captured_kernel_compiled_outside_the_cache_fails_the_humming_line(tmp_path):
    outside = tmp_path / "2.cubin"
    outside.touch()
    state = humming_state()
    files = {**state.kernel_files, 2: str(outside)}
    facts = collect(
        stack_scheduler(), SourcesDouble(humming_state=replace(state, kernel_files=files))
    )
    assert facts["humming"]["captured_cubins_in_cache"] == 1
    assert lines(facts)["humming"].verdict is Verdict.FAIL


def test_a_captured_kernel_whose_cubin_is_gone_is_not_counted_in_the_cache():
    state = humming_state()
    files = {**state.kernel_files, 1: str(HUMMING_CACHE / "deleted.cubin")}
    facts = collect(
        stack_scheduler(), SourcesDouble(humming_state=replace(state, kernel_files=files))
    )
    assert facts["humming"]["captured_cubins_in_cache"] == 1


def test_a_draft_with_its_own_head_module_is_reported_unshared():
    scheduler = stack_scheduler()
    target = scheduler.tp_worker.model_runner.model
    draft = scheduler.draft_worker.draft_worker.draft_runner.model
    draft.lm_head = of_class(
        "ParallelLMHead",
        quant_method=of_class("UnquantizedLinearMethod"),
        weight=target.lm_head.weight,
    )
    facts = collect(scheduler, SourcesDouble())
    assert facts["sharing"] == {
        "head_module_shared": False,
        "head_weight_shared": True,
        "embed_shared": True,
    }
    shared = lines(facts)["shared_head"]
    assert shared.verdict is Verdict.FAIL
    assert "via UnquantizedLinearMethod" in shared.evidence


def test_a_bf16_head_left_by_stock_sglang_fails_the_fp8_line():
    scheduler = stack_scheduler()
    head = scheduler.tp_worker.model_runner.model.lm_head
    head.quant_method = of_class("UnquantizedEmbeddingMethod")
    head.weight = TensorDouble("torch.bfloat16", (157184, 2560))
    facts = collect(scheduler, SourcesDouble())
    assert facts["head_target"]["weight_dtype"] == "bfloat16"
    assert lines(facts)["fp8_head"].verdict is Verdict.FAIL


def test_a_faking_variable_set_in_the_scheduler_is_reported(monkeypatch):
    monkeypatch.setenv("SGLANG_SIMULATE_ACC_LEN", "3.5")
    facts = collect(stack_scheduler(), SourcesDouble())
    assert facts["env"]["SGLANG_SIMULATE_ACC_LEN"] == "3.5"
    assert lines(facts)["no_faking"].verdict is Verdict.FAIL


def test_a_head_never_quantized_is_reported_without_reading_the_method():
    facts = collect(
        stack_scheduler(), SourcesDouble(fp8_facts={"installed": False}, fp8_method=None)
    )
    assert facts["fp8_head"] == {"installed": False}
    assert lines(facts)["fp8_head_speed"].evidence == "no FP8 head was timed"


def test_the_doctor_prints_what_sglang_resolved_every_override_in():
    from app.render.proof import format_report

    facts = collect(stack_scheduler(), SourcesDouble())
    assert facts["ran_with"]["cuda_graph_config"] == {"decode": {"backend": "full", "bs": [1]}}
    assert "model_path" not in facts["ran_with"]
    report = build_report(facts, profile="stack", min_accept_length=1.5, warmup_accept_length=3.2)
    line = format_report(report).splitlines()[1]
    assert line.startswith("  engine ran with: moe_runner_backend='humming', quantization=None")
    assert "cuda_graph_config={'decode': {'backend': 'full', 'bs': [1]}}" in line


def test_the_router_fact_counts_every_gate_s_dtype_and_bytes_in_target_and_draft():
    gate = 512 * 2560
    for router, size, config in (("float32", 4, "fp32"), ("bfloat16", 2, "bf16")):
        facts = collect(stack_scheduler(router=router), SourcesDouble())
        assert facts["router"] == {
            "config_router_dtype": config,
            "target": {"dtypes": {router: 5}, "bytes": 5 * gate * size},
            "draft": {"dtypes": {router: 1}, "bytes": gate * size},
        }
    assert collect(plain_scheduler(), SourcesDouble())["router"]["draft"] is None


class DraftLayersDouble:
    """The DSpark draft's layers as `named_modules` walks them."""

    def __init__(self, modules: dict[str, Any]):
        self.modules = modules

    def named_modules(self) -> Any:
        return iter(self.modules.items())


class ParamsDouble:
    """A module whose `parameters()` are the given tensors."""

    def __init__(self, *params: TensorDouble):
        self.params = params

    def parameters(self) -> Any:
        return iter(self.params)


def test_the_draft_s_weights_are_its_layer_linears_and_its_own_bytes_not_the_target_s():
    from app.levers.draft.fp8_draft import draft_weights

    fp8 = [TensorDouble("torch.float8_e4m3fn", (6144, 2560)) for _ in range(2)]
    scale = TensorDouble("torch.float32", (6144, 1))
    markov = TensorDouble("torch.bfloat16", (157184, 2560))
    head = ParamsDouble(TensorDouble("torch.float8_e4m3fn", (157184, 2560)))
    embed = ParamsDouble(TensorDouble("torch.bfloat16", (157184, 2560)))
    layers = DraftLayersDouble(
        {
            "0.self_attn.qkv_proj": of_class(
                "QKVParallelLinear", quant_method=of_class("Fp8LinearMethod"), weight=fp8[0]
            ),
            "0.mlp.down_proj": of_class(
                "RowParallelLinear", quant_method=of_class("Fp8LinearMethod"), weight=fp8[1]
            ),
            "0.self_attn.attn": of_class(
                "RadixAttention", quant_method=of_class("Fp8KVCacheMethod")
            ),  # no weight: not a linear
            "0.input_layernorm": of_class("RMSNorm", weight=markov),  # no quant method
        }
    )
    draft = of_class(
        "LingDSparkModel",
        layers=layers,
        lm_head=head,
        embed_tokens=embed,
        parameters=lambda: iter([*fp8, scale, markov, *head.params, *embed.params]),
    )
    assert draft_weights(draft) == {
        "layer_linears": {"Fp8LinearMethod": 2},
        "layer_linear_dtypes": {"float8_e4m3fn": 2},
        "own_bytes": {
            "float8_e4m3fn": 2 * 6144 * 2560,
            "float32": 6144 * 4,
            "bfloat16": 157184 * 2560 * 2,
        },
    }


def test_draft_weights_that_cannot_be_read_raise_for_collect_to_report_as_their_own_fact():
    """`dspark_weights` is a fact of its own: `collect` reports its error there, and the dspark
    fact that every DSpark line reads stays whole."""
    from app.levers.draft.fp8_draft import draft_weights

    draft = of_class("LingDSparkModel", layers=DraftLayersDouble({}))  # no lm_head
    with pytest.raises(AttributeError, match="lm_head"):
        draft_weights(draft)
