"""Judging a facts dict with the test floors, and reading one line's verdict."""

from __future__ import annotations

from typing import Any

from app.backend.proof import build_report
from app.core.proof_report import ProofReport, Verdict


def judge(facts: dict[str, Any], accept: float | None = 3.2, profile: str = "stack") -> ProofReport:
    return build_report(facts, profile=profile, min_accept_length=1.5, warmup_accept_length=accept)


def verdict(report: ProofReport, key: str) -> Verdict:
    return next(line.verdict for line in report.lines if line.key == key)
