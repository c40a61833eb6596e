"""`ling-chat serve` judges itself: only a proof that ran and passed keeps it serving."""

from __future__ import annotations

import pytest

from app.backend.server import judge
from app.errors import BackendError
from app.proof_report import ProofLine, ProofReport, Verdict


def report(verdict: Verdict) -> ProofReport:
    return ProofReport("stack", (ProofLine("humming", "Humming", verdict, "6/6", "fix"),))


@pytest.mark.parametrize(("verdict", "ok"), [(Verdict.PASS, True), (Verdict.FAIL, False)])
def test_the_verdict_is_the_reports(verdict: Verdict, ok: bool) -> None:
    seen: list[ProofReport] = []
    assert judge(lambda: report(verdict), seen.append) is ok
    assert seen == [report(verdict)]


def test_a_proof_that_cannot_run_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> ProofReport:
        raise BackendError("warm-up failed: HTTP 500")

    seen: list[ProofReport] = []
    assert judge(broken, seen.append) is False
    assert seen == []
    assert "refused to serve: the proof could not run (warm-up failed: HTTP 500)" in (
        capsys.readouterr().out
    )
