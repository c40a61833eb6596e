"""The proof: every lever of `app.levers.profiles.LEVERS` judges its facts, read from the
running model in SGLang's scheduler, into its lines for the profile (on, off or none).

Pure: nothing here looks at the arguments the engine was started with. The warm-up's accept
length, measured by the backend, joins the scheduler's facts before the judging.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.levers.checks import accept_length
from app.levers.lever import Facts, Line
from app.levers.lines import LACKING_FIX, error
from app.levers.model.cuda_graphs import follow_graphs
from app.levers.profiles import BF16_ROUTER_PROFILES, LEVERS, PROFILES

PROOF_KEY = "ling_chat_proof"
"""Where the patched scheduler publishes its evidence: a key of its init info, which a
server's `/server_info` merges in at the top level."""
ROUTER = Line(
    "router",
    "BF16 router gates (opt-in)",
    "run profile stack+bf16-router as ling-chat sets it (json_model_override_args "
    "router_dtype bf16)",
)
LINES = {line.key: line for lever in LEVERS for line in lever.lines} | {ROUTER.key: ROUTER}
"""Every proof line any lever may print, by key."""


def build_report(
    facts: Facts,
    *,
    profile: str,
    min_accept_length: float,
    warmup_accept_length: float | None,
) -> ProofReport:
    """Judge every lever for `profile` from the facts and the warm-up's accept length."""
    judged: dict[str, Any] = {**facts, accept_length.FACT: warmup_accept_length}
    known = {**judged, accept_length.MIN_FACT: min_accept_length}
    chosen = PROFILES[profile]
    judged_lines: list[ProofLine] = []
    for lever in LEVERS:
        judged_lines += lever.judge(known, chosen)
        if lever.name == "fp32_head" and profile in BF16_ROUTER_PROFILES:
            judged_lines.append(_router(known))
    lines = follow_graphs(judged_lines)
    return ProofReport(profile=profile, lines=tuple(lines), facts=judged)


def _router(facts: Facts) -> ProofLine:
    """Every router gate (target, NEXTN draft) in BF16 (the BF16 router's line, on its
    profiles only)."""
    if err := error(facts, "router"):
        fix = LACKING_FIX if "router" not in facts else ROUTER.fix
        return ProofLine(ROUTER.key, ROUTER.title, Verdict.FAIL, err, fix)
    router = facts["router"]
    models = {"target": router["target"], "draft": router.get("draft")}
    dtypes: Counter[str] = Counter()
    for gates in filter(None, models.values()):
        dtypes.update(gates["dtypes"])
    counts = ", ".join(
        f"{sum(gates['dtypes'].values())} {name}" for name, gates in models.items() if gates
    )
    nbytes = sum(gates["bytes"] for gates in filter(None, models.values()))
    evidence = (
        f"{sum(dtypes.values())} router gates ({counts}): "
        + ", ".join(f"{t} {n}" for t, n in sorted(dtypes.items()))
        + f", {nbytes / 1e6:.1f} MB; config router_dtype {router['config_router_dtype']!r}"
    )
    if not dtypes:
        evidence = "no router gate found in the model"
    ok = set(dtypes) == {"bfloat16"}
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine(ROUTER.key, ROUTER.title, verdict, evidence, "" if ok else ROUTER.fix)


def refusal_report(profile: str, key: str, message: str) -> ProofReport:
    """The report when the engine refused to start (a `boundary.refusal` from the scheduler)."""
    known = LINES.get(key)
    title, fix = (known.title, known.fix) if known else (key, "")
    line = ProofLine(key, title, Verdict.FAIL, message, fix)
    return ProofReport(profile=profile, lines=(line,), facts={"refused": {key: message}})
