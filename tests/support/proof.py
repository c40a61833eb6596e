"""Judging a facts dict with the test floors, and reading one line's verdict."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.backend.proof import build_report
from app.core.proof_report import ProofReport, Verdict
from tests.fixtures.sglang_objects import (
    bf16_router_facts,
    dspark_facts,
    hot_vocab_facts,
    recipe_facts,
    stack_facts,
    stack_recurrent_facts,
)

HEALTHY: dict[str, Callable[[], dict[str, Any]]] = {
    "stack": stack_facts,
    "stack-recurrent": stack_recurrent_facts,
    "baseline": recipe_facts,
    "dspark": dspark_facts,
    "stack+bf16-router": bf16_router_facts,
    "dspark+fp8-draft": lambda: dspark_facts(fp8_draft=True),
    "stack+hot-vocab": hot_vocab_facts,
}
"""The facts of a healthy engine, by profile: every line passes on them (a lever's tests judge
it on the first profile here that has it)."""


def judge(facts: dict[str, Any], accept: float | None = 3.2, profile: str = "stack") -> ProofReport:
    return build_report(facts, profile=profile, min_accept_length=1.5, warmup_accept_length=accept)


def verdict(report: ProofReport, key: str) -> Verdict:
    return next(line.verdict for line in report.lines if line.key == key)
