"""NEXTN draft depth: the geometric chain, SGLang's adaptive rule, TPOT per depth, the verdicts,
and lab/scripts/depth_eval.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.bench.bytemodel.kernels import KernelProfile, KernelRecord, Phase
from app.bench.bytemodel.mtp import Routing
from lab.research.depth import (
    ACCEPT_PROFILES,
    AcceptModel,
    AcceptProfile,
    RoundCosts,
    accept_model,
    byte_model_costs,
    evaluate,
    profiled_costs,
    recommend,
)
from lab.research.draft_chain import (
    SGLANG_BATCH1,
    AdaptiveRule,
    accept_length,
    adaptive_mean_field,
    adaptive_occupancy,
    fit_acceptance,
)
from lab.research.spark_fit import Fit

ROOT = Path(__file__).resolve().parents[2]
SPARK_PROJECTION = ROOT / "lab" / "results" / "spark-projection.json"
COMMITTED = ROOT / "lab" / "results" / "depth-eval-projection.json"


# --- the chain ---------------------------------------------------------------------------


def test_accept_length_is_the_chain_s_sum_with_the_bonus_token() -> None:
    assert accept_length(0, 0.7) == 1.0
    assert accept_length(3, 0.5) == 1 + 0.5 + 0.25 + 0.125
    assert accept_length(7, 1.0) == 8.0
    assert accept_length(3, 0.0) == 1.0


@pytest.mark.parametrize(("accept", "p"), [(2.68, 0.73688), (3.9, 0.98314), (1.0, 0.0), (4.0, 1.0)])
def test_the_fit_finds_the_p_of_a_measured_accept_length(accept: float, p: float) -> None:
    fitted = fit_acceptance(accept, 3)
    assert fitted == pytest.approx(p, abs=1e-5)
    assert accept_length(3, fitted) == pytest.approx(accept, abs=1e-12)


@pytest.mark.parametrize("accept", [0.99, 4.01])
def test_an_accept_length_no_chain_yields_is_refused(accept: float) -> None:
    with pytest.raises(ValueError, match=r"lies in \[1, 4\]"):
        fit_acceptance(accept, 3)


# --- SGLang's adaptive rule --------------------------------------------------------------


# The thresholds of SGLang 0.5.23's AdaptiveStepSlot._recompute_params at batch 1: down past
# candidate c when EMA <= c - 0.5 - 0.25; up past the current candidate c when EMA > c - 0.5.
@pytest.mark.parametrize(
    ("current", "ema", "steps"),
    [
        (3, 2.5, 3),
        (3, 2.5001, 5),
        (3, 2.99, 5),  # one move up per candidate the EMA clears: 2.99 does not clear 4.5
        (1, 4.6, 7),  # ... but it climbs every candidate it clears at once
        (3, 0.2501, 3),
        (3, 0.25, 1),
        (5, 2.2501, 5),
        (5, 2.25, 3),
        (7, 4.2501, 7),
        (7, 4.25, 5),
        (7, 2.0, 3),
        (7, 0.1, 1),
        (1, 0.5, 1),
        (1, 0.5001, 3),
    ],
)
def test_the_rule_moves_at_sglang_s_thresholds(current: int, ema: float, steps: int) -> None:
    assert SGLANG_BATCH1.next_steps(current, ema) == steps


def test_the_batch_1_rule_is_sglang_s_default_started_at_the_stack_s_depth() -> None:
    rule = SGLANG_BATCH1
    assert rule.candidates == (1, 3, 5, 7)
    assert (rule.up_hysteresis, rule.down_hysteresis) == (0.0, -0.25)
    assert (rule.ema_alpha, rule.update_interval, rule.warmup_batches) == (0.2, 5, 10)
    assert rule.initial_steps == 3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"candidates": (3, 1)}, "rising"),
        ({"candidates": (0, 3)}, "positive"),
        ({"candidates": ()}, "positive"),
        ({"initial_steps": 2}, "not a candidate"),
        ({"down_hysteresis": 0.1}, "oscillate"),
    ],
)
def test_rules_the_model_cannot_follow_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AdaptiveRule(**kwargs)


@pytest.mark.parametrize(
    ("p", "steps"),
    [
        (fit_acceptance(2.68, 3), 3),  # accepted drafts 1.68 at 3: under 2.5, over 0.25
        (fit_acceptance(3.9, 3), 7),  # 2.9 at 3 clears 2.5; 4.75 at 5 clears 4.5
        (0.93, 5),  # 2.60 at 3 clears 2.5; 4.04 at 5 neither clears 4.5 nor falls to 2.25
        (0.1, 1),  # 0.111 at 3 falls to 0.25
    ],
)
def test_the_mean_field_settles_where_the_expected_ema_stops_moving(p: float, steps: int) -> None:
    assert adaptive_mean_field(SGLANG_BATCH1, p) == steps


def test_every_draft_accepted_climbs_after_warm_up_at_the_recomputes() -> None:
    # EMA from 2 toward 3: 2.965 at verify 15 (the first recompute) -> 5; toward 5: 4.33 at
    # verify 20, 4.79 at 25 -> 7. So 15 verifies at 3, 10 at 5, the rest at 7.
    assert adaptive_occupancy(SGLANG_BATCH1, 1.0, rounds=100, seed=0) == {
        3: 0.15,
        5: 0.10,
        7: 0.75,
    }


def test_no_draft_accepted_drops_to_one_step_at_the_first_recompute() -> None:
    # EMA 2 x 0.8^15 = 0.07 <= 0.25 at verify 15.
    assert adaptive_occupancy(SGLANG_BATCH1, 0.0, rounds=100, seed=0) == {3: 0.15, 1: 0.85}


def test_the_simulation_is_seeded_and_its_shares_sum_to_one() -> None:
    p = fit_acceptance(2.68, 3)
    first = adaptive_occupancy(SGLANG_BATCH1, p, rounds=20_000, seed=7)
    assert first == adaptive_occupancy(SGLANG_BATCH1, p, rounds=20_000, seed=7)
    assert sum(first.values()) == pytest.approx(1.0)
    # a noisy EMA at GSM8K's p sometimes clears 2.5 and spends a few verifies at 5
    assert first[3] > 0.9
    assert 0 < first.get(5, 0.0) < 0.1


# --- TPOT per depth and the verdicts -----------------------------------------------------

LINEAR = RoundCosts("test regime", {k: 10.0 + 2.0 * k for k in range(1, 8)}, decode_ms=8.0)


def model_of(accept: float, occupancy: dict[int, float] | None = None) -> AcceptModel:
    p = fit_acceptance(accept, 3)
    return AcceptModel(
        profile=AcceptProfile("test", accept),
        p=p,
        adaptive_mean_field_steps=adaptive_mean_field(SGLANG_BATCH1, p),
        adaptive_occupancy=occupancy or {3: 1.0},
        simulated_rounds=1,
        seed=0,
    )


def test_tpot_is_the_round_over_the_chain_s_accept_length() -> None:
    model = model_of(3.0)
    verdict = evaluate(LINEAR, model)
    rows = {row.steps: row for row in verdict.rows}
    assert rows[3].accept_length == pytest.approx(3.0)
    assert rows[3].tpot_ms == pytest.approx(16.0 / 3.0)
    assert rows[3].speedup == pytest.approx(8.0 / (16.0 / 3.0))
    assert rows[5].tpot_ms == pytest.approx(20.0 / accept_length(5, model.p))
    tpot = {k: r.tpot_ms for k, r in rows.items()}
    assert verdict.best_steps == min(tpot, key=tpot.__getitem__)
    assert verdict.best_gain == pytest.approx(tpot[3] / tpot[verdict.best_steps] - 1)
    assert "geometric chain" in verdict.model
    assert verdict.regime == "test regime"


def test_adaptive_tpot_weighs_each_depth_by_its_share_of_verifies() -> None:
    model = model_of(3.0, {3: 0.5, 5: 0.5})
    adaptive = evaluate(LINEAR, model).adaptive
    a3, a5 = accept_length(3, model.p), accept_length(5, model.p)
    assert adaptive.tpot_ms == pytest.approx((0.5 * 16 + 0.5 * 20) / (0.5 * a3 + 0.5 * a5))
    assert adaptive.gain == pytest.approx((16 / a3) / adaptive.tpot_ms - 1)
    assert adaptive.missing_steps == ()


def test_adaptive_without_a_round_at_a_depth_it_visits_is_unknown() -> None:
    costs = RoundCosts("measured", {2: 14.0, 3: 16.0, 4: 18.0}, decode_ms=None)
    verdict = evaluate(costs, model_of(3.0, {3: 0.9, 5: 0.1}))
    assert verdict.adaptive.tpot_ms is None
    assert verdict.adaptive.gain is None
    assert verdict.adaptive.missing_steps == (5,)
    assert verdict.rows[0].speedup is None


def test_a_regime_without_the_default_depth_is_refused() -> None:
    with pytest.raises(ValueError, match="no round at the default 3 steps"):
        evaluate(RoundCosts("r", {2: 1.0, 4: 2.0}, None), model_of(3.0))


def test_a_depth_that_wins_under_one_profile_and_loses_under_another_replaces_nothing() -> None:
    # cheap rounds per extra step favour depth under the high accept, not under the low one
    costs = RoundCosts("r", {k: 10.0 + 4.0 * k for k in range(1, 8)}, None)
    low, high = evaluate(costs, model_of(2.0)), evaluate(costs, model_of(3.9))
    assert low.best_steps < 3 < high.best_steps
    rec = recommend([low, high])
    assert rec.replacement_steps is None
    assert rec.replacement_min_gain is None


def test_the_replacement_is_the_depth_whose_smallest_gain_is_largest() -> None:
    costs = RoundCosts("r", {k: 30.0 + 1.0 * k for k in range(1, 8)}, None)
    verdicts = [evaluate(costs, model_of(2.68)), evaluate(costs, model_of(3.9))]
    rec = recommend(verdicts)
    tpots = [{r.steps: r.tpot_ms for r in v.rows} for v in verdicts]
    gains = {k: min(t[3] / t[k] - 1 for t in tpots) for k in range(1, 8) if k != 3}
    assert rec.replacement_steps == max(gains, key=gains.__getitem__)
    assert rec.replacement_min_gain == pytest.approx(max(gains.values()))
    assert rec.replacement_min_gain > 0


@pytest.mark.parametrize(
    ("occupancies", "beats"),
    [
        ([{3: 1.0}, {3: 1.0}], False),  # the default itself: no faster anywhere
        ([{3: 0.5, 4: 0.5}, {3: 1.0}], True),  # faster under one, the same under the other
        ([{3: 0.5, 1: 0.5}, {3: 1.0}], False),  # slower under one
        ([{3: 0.5, 9: 0.5}, {3: 1.0}], None),  # no round at 9: unknown
        ([{3: 0.5, 9: 0.5}, {3: 0.5, 1: 0.5}], False),  # unknown under one, slower under one
    ],
)
def test_adaptive_beats_the_default_only_when_no_slower_anywhere(
    occupancies: list[dict[int, float]], beats: bool | None
) -> None:
    costs = RoundCosts("r", {1: 12.0, 3: 16.0, 4: 17.0}, None)
    rec = recommend([evaluate(costs, model_of(3.5, occ)) for occ in occupancies])
    assert rec.adaptive_beats_default is beats


def test_a_recommendation_is_of_one_regime() -> None:
    model = model_of(3.0)
    one, other = evaluate(LINEAR, model), evaluate(RoundCosts("other", LINEAR.round_ms, 8.0), model)
    with pytest.raises(ValueError, match="one regime"):
        recommend([one, other])
    with pytest.raises(ValueError, match="one regime"):
        recommend([])


# --- round costs -------------------------------------------------------------------------


def spark_fit() -> tuple[Fit, int]:
    data = json.loads(SPARK_PROJECTION.read_text())
    f = data["fit"]
    return Fit(f["bandwidth_gbps"], f["fixed_us_per_kernel"], f["constrained"]), data[
        "context_tokens"
    ]


def test_the_byte_model_s_default_round_and_step_are_the_spark_projection_s() -> None:
    fit, context = spark_fit()
    costs = byte_model_costs(fit, context_tokens=context, steps=[3])
    nextn = json.loads(SPARK_PROJECTION.read_text())["nextn"]
    assert costs.round_ms[3] == pytest.approx(nextn["fp8_round_ms"], rel=1e-12)
    assert costs.decode_ms == pytest.approx(nextn["step_ms"], rel=1e-12)
    assert costs.regime.startswith("Spark projection (byte model, independent routing")


def test_deeper_rounds_cost_more_and_shared_routing_bounds_them_below() -> None:
    fit, context = spark_fit()
    independent = byte_model_costs(fit, context_tokens=context, steps=range(1, 8))
    shared = byte_model_costs(
        fit, context_tokens=context, steps=range(1, 8), routing=Routing.SHARED
    )
    for costs in (independent, shared):
        rounds = [costs.round_ms[k] for k in range(1, 8)]
        assert rounds == sorted(rounds) and len(set(rounds)) == 7
    for k in range(1, 8):
        assert shared.round_ms[k] < independent.round_ms[k]
    assert "shared routing" in shared.regime
    assert shared.decode_ms == independent.decode_ms


def test_a_fixed_cost_per_kernel_needs_kernel_profiles() -> None:
    with pytest.raises(ValueError, match="no kernel calls per depth"):
        byte_model_costs(Fit(200.0, 3.0, False), context_tokens=2048, steps=[3])


def round_profile(steps: int, total_us: float, **changes: Any) -> KernelProfile:
    fields: dict[str, Any] = {
        "gpu": "NVIDIA H200",
        "layers": 42,
        "profile": "stack-recurrent",
        "phase": Phase.VERIFY,
        "rounds": 16,
        "accept_length": steps + 1.0,
        "context_tokens": 2048,
        "kernels": (KernelRecord("a", 32, total_us / 4), KernelRecord("b", 16, total_us * 3 / 4)),
        "draft_steps": steps,
    }
    return KernelProfile(**{**fields, **changes})


def test_measured_rounds_are_gpu_time_per_round_by_depth() -> None:
    step = round_profile(3, 16 * 7700.0, phase=Phase.DECODE, profile="humming+fp8")
    older = round_profile(2, 16 * 10000.0, profile="stack")  # a `stack` file, recurrent verify
    costs = profiled_costs([round_profile(4, 16 * 13000.0), older], step)
    assert costs.round_ms == {2: pytest.approx(10.0), 4: pytest.approx(13.0)}
    assert list(costs.round_ms) == [2, 4]
    assert costs.decode_ms == pytest.approx(7.7)
    assert costs.regime.startswith("NVIDIA H200 measured round time (GPU kernel time, stack-rec")


@pytest.mark.parametrize(
    ("rounds", "decode", "message"),
    [
        ([], None, "no verify profile"),
        ([round_profile(2, 1.0), round_profile(2, 2.0)], None, "given twice"),
        ([round_profile(2, 1.0, phase=Phase.DECODE)], None, "phase verify"),
        ([round_profile(2, 1.0), round_profile(3, 1.0, gpu="NVIDIA H100")], None, "differ"),
        ([round_profile(2, 1.0), round_profile(3, 1.0, profile="humming+nextn")], None, "differ"),
        (
            [round_profile(2, 1.0), round_profile(3, 1.0, profile="stack", replayssm=True)],
            None,
            "differ",
        ),
        ([round_profile(2, 1.0)], round_profile(3, 1.0), "not of phase decode"),
        (
            [round_profile(2, 1.0)],
            round_profile(3, 1.0, phase=Phase.DECODE, context_tokens=4096),
            "another GPU, model or context",
        ),
    ],
)
def test_profiles_that_do_not_compare_are_refused(
    rounds: list[KernelProfile], decode: KernelProfile | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        profiled_costs(rounds, decode)


def test_the_accept_profiles_are_nvidia_s_published_ones() -> None:
    assert [(p.accept_length, p.steps) for p in ACCEPT_PROFILES] == [(2.68, 3), (3.9, 3)]
    model = accept_model(ACCEPT_PROFILES[0], rounds=1000)
    assert model.p == pytest.approx(fit_acceptance(2.68, 3))
    assert model.adaptive_mean_field_steps == 3


# --- the script --------------------------------------------------------------------------


def run_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "depth.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "lab" / "scripts" / "depth_eval.py"), "--out", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    return proc, out


def profile_file(tmp_path: Path, name: str, steps: int | None, us: float, **extra: Any) -> str:
    data: dict[str, Any] = {
        "gpu": "NVIDIA H200",
        "layers": 42,
        "profile": "stack-recurrent" if steps else "humming+fp8",
        "phase": "verify" if steps else "decode",
        "rounds": 10,
        "accept_length": None,
        "context_tokens": 2048,
        "kernels": [{"name": "k", "calls": 10, "total_us": 10 * us}],
        **({"draft_steps": steps} if steps else {}),
        **extra,
    }
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return str(path)


def test_the_committed_projection_is_the_script_s_output(tmp_path: Path) -> None:
    proc, out = run_script(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == json.loads(COMMITTED.read_text())
    assert proc.stdout.startswith("TPOT MODELLED, not measured")
    assert "[A] Spark projection (byte model, independent routing" in proc.stdout
    assert "[B] Spark projection (byte model, shared routing" in proc.stdout
    for name in ("GSM8K-like: accept 2.68", "synthetic: accept 3.9", "geometric chain"):
        assert name in proc.stdout


def test_measured_rounds_join_the_table_labelled_with_their_weights(tmp_path: Path) -> None:
    rounds = [
        profile_file(tmp_path, f"k{k}.json", k, 9000.0 + 1500 * k, known_answer=True)
        for k in (2, 3, 4)
    ]
    step = profile_file(tmp_path, "step.json", None, 7700.0)
    proc, out = run_script(tmp_path, "--profiles", *rounds, "--decode-profile", step)
    assert proc.returncode == 0, proc.stderr
    regimes = json.loads(out.read_text())["regimes"]
    assert len(regimes) == 3
    measured = regimes[2]
    assert measured["regime"].startswith("NVIDIA H200 measured round time")
    assert "known-answer weights" in measured["regime"]
    assert measured["round_ms"] == {"2": 12.0, "3": 13.5, "4": 15.0}
    assert measured["decode_ms"] == pytest.approx(7.7)
    assert "[C] NVIDIA H200 measured round time" in proc.stdout
    assert "[C] needs rounds at [5]" in proc.stdout


def test_profiles_of_mixed_weights_are_refused_in_one_line(tmp_path: Path) -> None:
    rounds = [
        profile_file(tmp_path, "k2.json", 2, 1.0, known_answer=True),
        profile_file(tmp_path, "k3.json", 3, 1.0, known_answer=False),
    ]
    proc, out = run_script(tmp_path, "--profiles", *rounds)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: the round profiles mix known-answer and random weights"
    assert not out.exists()
