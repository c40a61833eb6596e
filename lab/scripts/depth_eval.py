"""Fixed NEXTN depths 1..7 and SGLang's adaptive steps, per accept profile (a model).

Round times per depth come from the byte model on the Spark fitted in
lab/results/spark-projection.json (both routing bounds), and, given kernel profiles of
stack-recurrent at several depths (lab/scripts/gpu_kernel_profile.py --steps), from their
measured GPU time. Both price the stack's round with SGLang's recurrent verify.
Acceptance is a geometric chain fitted to each published accept length
(lab/research/draft_chain.py).
Prints a table per accept profile and writes JSON.

    python lab/scripts/depth_eval.py [--profiles kernels-stack-recurrent-42-k2.json ...]
        [--decode-profile kernels-humming-fp8-42.json]
        [--out lab/results/depth-eval-projection.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.bench.bytemodel.kernels import KernelProfile  # noqa: E402
from app.bench.bytemodel.mtp import Routing  # noqa: E402
from lab.research.depth import (  # noqa: E402
    ACCEPT_MODEL,
    ACCEPT_PROFILES,
    AcceptModel,
    Recommendation,
    RoundCosts,
    accept_model,
    byte_model_costs,
    evaluate,
    profiled_costs,
    recommend,
)
from lab.research.draft_chain import SGLANG_BATCH1  # noqa: E402
from lab.research.spark_fit import Fit  # noqa: E402

DEFAULT = SGLANG_BATCH1.initial_steps
DEPTHS = range(1, max(SGLANG_BATCH1.candidates) + 1)
WEIGHTS = {
    True: "known-answer weights: every token routes to the same experts (shared routing)",
    False: "random weights: tokens route apart (about independent routing)",
}
NOTE = (
    "A model, not a measurement. TPOT per depth = round time / accept length of a geometric "
    "chain (one acceptance probability a draft token, fitted to the accept length at 3 "
    "steps; optimistic for deep drafts). Round times: the byte model on the Spark fitted in "
    "lab/results/spark-projection.json (independent routing: upper bound on the verify's expert "
    "bytes; shared: lower bound), and, where given, kernel profiles' measured GPU time. "
    "Adaptive: SGLang 0.5.23's batch-1 rule under a stationary acceptance, simulated."
)


def read_json(path: Path) -> Any:
    """A JSON file; ValueError names the file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: {err}") from None


def read_profile(path: Path) -> tuple[KernelProfile, Any]:
    """One kernel-profile file, read and as loaded; ValueError names the file."""
    data = read_json(path)
    try:
        return KernelProfile.from_dict(data), data
    except (ValueError, AttributeError) as err:
        raise ValueError(f"{path}: {err}") from None


def measured_costs(paths: list[Path], decode_path: Path | None) -> RoundCosts:
    """The profiles' round per depth, labelled with the weights they ran."""
    read = [read_profile(path) for path in paths]
    decode = None if decode_path is None else read_profile(decode_path)[0]
    costs = profiled_costs([profile for profile, _ in read], decode)
    weights = {data.get("known_answer") for _, data in read}
    if len(weights) > 1:
        raise ValueError("the round profiles mix known-answer and random weights")
    label = WEIGHTS.get(weights.pop())
    return costs if label is None else dataclasses.replace(costs, regime=f"{costs.regime}; {label}")


def spark_costs(projection: dict[str, Any]) -> list[RoundCosts]:
    """Both routing bounds of the byte model on the fitted Spark."""
    try:
        f = projection["fit"]
        fit = Fit(float(f["bandwidth_gbps"]), float(f["fixed_us_per_kernel"]), f["constrained"])
        context = int(projection["context_tokens"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"the Spark projection lacks its fit: {err}") from None
    return [
        byte_model_costs(fit, context_tokens=context, steps=DEPTHS, routing=routing)
        for routing in Routing
    ]


def _pct(gain: float | None) -> str:
    return "?" if gain is None else f"{gain:+.2%}"


def table(models: list[AcceptModel], recs: list[Recommendation], decode: list[float | None]) -> str:
    """Per accept profile, each depth's round, TPOT and speed-up in every regime."""
    tags = [f"[{chr(ord('A') + i)}]" for i in range(len(recs))]
    lines = [
        "TPOT MODELLED, not measured: a round's time (its regime below) over the accept "
        f"length of a {ACCEPT_MODEL}."
    ]
    rule = SGLANG_BATCH1
    lines.append(
        f"Adaptive: SGLang 0.5.23 batch-1 rule, candidates {list(rule.candidates)}, EMA "
        f"alpha {rule.ema_alpha}, a recompute every {rule.update_interval} verifies after "
        f"{rule.warmup_batches}, hysteresis up {rule.up_hysteresis} / down {rule.down_hysteresis}"
        f"; simulated under a stationary p."
    )
    for tag, rec, step in zip(tags, recs, decode, strict=True):
        plain = "no plain step" if step is None else f"plain step {step:.2f} ms"
        lines.append(f"{tag} {rec.regime}; {plain}")
    for i, model in enumerate(models):
        prof = model.profile
        lines += [
            "",
            f"{prof.name}: accept {prof.accept_length} at {prof.steps} steps -> p = "
            f"{model.p:.4f} (geometric chain)",
            f"{'k':>2} {'accept':>6} | "
            + " | ".join(f"{tag} {'round':>7} {'TPOT':>6} {'x plain':>7}" for tag in tags),
        ]
        verdicts = [rec.verdicts[i] for rec in recs]
        depths = sorted({row.steps for v in verdicts for row in v.rows})
        for k in depths:
            cells, accept = [], None
            for v in verdicts:
                row = next((r for r in v.rows if r.steps == k), None)
                if row is None:
                    cells.append(f"{'':3} {'-':>7} {'-':>6} {'-':>7}")
                    continue
                accept = row.accept_length
                speedup = "-" if row.speedup is None else f"{row.speedup:.2f}x"
                cells.append(f"{'':3} {row.round_ms:7.2f} {row.tpot_ms:6.2f} {speedup:>7}")
            lines.append(f"{k:>2} {accept:6.2f} | " + " | ".join(cells))
        lines.append(
            "best fixed: "
            + "; ".join(
                f"{tag} {v.best_steps} ({_pct(v.best_gain)} vs {DEFAULT})"
                for tag, v in zip(tags, verdicts, strict=True)
            )
        )
        shares = ", ".join(f"{k}: {s:.2%}" for k, s in model.adaptive_occupancy.items())
        parts = []
        for tag, v in zip(tags, verdicts, strict=True):
            a = v.adaptive
            if a.tpot_ms is None:
                parts.append(f"{tag} needs rounds at {list(a.missing_steps)}")
            else:
                parts.append(f"{tag} {a.tpot_ms:.2f} ms ({_pct(a.gain)} vs {DEFAULT})")
        lines.append(
            f"adaptive: settles at {model.adaptive_mean_field_steps} (mean field); verifies "
            f"at {shares}; " + "; ".join(parts)
        )
    lines.append("")
    for tag, rec in zip(tags, recs, strict=True):
        if rec.replacement_steps is None:
            fixed = f"no fixed depth beats {DEFAULT} under every profile: keep {DEFAULT}"
        else:
            fixed = (
                f"fixed {rec.replacement_steps} beats {DEFAULT} under every profile "
                f"(by {_pct(rec.replacement_min_gain)} at least)"
            )
        if rec.adaptive_beats_default is None:
            adaptive = "adaptive unknown (rounds missing)"
        else:
            verb = "beats" if rec.adaptive_beats_default else "does not beat"
            adaptive = f"adaptive {verb} {DEFAULT} under every profile"
            if rec.adaptive_min_gain is not None:
                adaptive += f" (smallest gain {_pct(rec.adaptive_min_gain)})"
        lines.append(f"{tag} {fixed}; {adaptive}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Build the table and JSON; 0 on success, 2 on bad input (one line on stderr)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--projection", type=Path, default=Path("lab/results/spark-projection.json")
    )
    parser.add_argument(
        "--profiles", type=Path, nargs="*", default=[], help="stack-recurrent, per depth"
    )
    parser.add_argument("--decode-profile", type=Path, help="the plain step (humming+fp8)")
    parser.add_argument("--out", type=Path, default=Path("lab/results/depth-eval-projection.json"))
    args = parser.parse_args(argv)
    try:
        costs = spark_costs(read_json(args.projection))
        if args.profiles:
            costs.append(measured_costs(args.profiles, args.decode_profile))
        models = [accept_model(profile) for profile in ACCEPT_PROFILES]
        recs = [recommend([evaluate(c, m) for m in models]) for c in costs]
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    result = {
        "kind": "model",
        "note": NOTE,
        "accept_model": ACCEPT_MODEL,
        "default_steps": DEFAULT,
        "adaptive_rule": dataclasses.asdict(SGLANG_BATCH1),
        "accept_models": [dataclasses.asdict(m) for m in models],
        "regimes": [
            {"round_ms": c.round_ms, "decode_ms": c.decode_ms, **dataclasses.asdict(rec)}
            for c, rec in zip(costs, recs, strict=True)
        ],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(table(models, recs, [c.decode_ms for c in costs]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
