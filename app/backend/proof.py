"""The proof: every lever of `app.levers.profiles.LEVERS` judges its facts, read from the
running model in SGLang's scheduler, into its lines for the profile (on, off or none).

Pure: nothing here looks at the arguments the engine was started with. The warm-up's accept
length, measured by the backend, joins the scheduler's facts before the judging.
"""

from __future__ import annotations

from typing import Any

from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.levers.checks import accept_length
from app.levers.lever import Facts
from app.levers.model.cuda_graphs import follow_graphs
from app.levers.profiles import LEVERS, PROFILES

PROOF_KEY = "ling_chat_proof"
"""Where the patched scheduler publishes its evidence: a key of its init info, which a
server's `/server_info` merges in at the top level."""
LINES = {line.key: line for lever in LEVERS for line in lever.lines}
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
    lines = follow_graphs([line for lever in LEVERS for line in lever.judge(known, chosen)])
    return ProofReport(profile=profile, lines=tuple(lines), facts=judged)


def refusal_report(profile: str, key: str, message: str) -> ProofReport:
    """The report when the engine refused to start (a `boundary.refusal` from the scheduler)."""
    known = LINES.get(key)
    title, fix = (known.title, known.fix) if known else (key, "")
    line = ProofLine(key, title, Verdict.FAIL, message, fix)
    return ProofReport(profile=profile, lines=(line,), facts={"refused": {key: message}})
