"""The proof's report as plain text, for the doctor and `ling-chat serve`."""

from __future__ import annotations

from app.core.proof_report import ProofReport, Verdict

MARKS = {Verdict.PASS: "PASS", Verdict.FAIL: "FAIL", Verdict.OFF: "off "}


def format_report(report: ProofReport) -> str:
    """The report as plain text: a line per lever, evidence and fix indented below."""
    lines = [f"ling-chat proof ({report.summary()})"]
    ran = report.facts.get("ran_with")
    if isinstance(ran, dict) and "error" not in ran:  # what SGLang resolved, every override in
        lines.append("  engine ran with: " + ", ".join(f"{k}={v!r}" for k, v in ran.items()))
    for line in report.lines:
        lines.append(f"  {MARKS[line.verdict]}  {line.title}")
        lines.append(f"        {line.evidence}")
        if line.verdict is Verdict.FAIL and line.fix:
            lines.append(f"        fix: {line.fix}")
    lines.append("ready: every optimization is engaged" if report.ok else "refused to start")
    return "\n".join(lines)
