"""The proof's report as text: what each line shows (`proof_rows`, the chat's proof screen
styles them too), and the plain text of the doctor and `ling-chat serve`."""

from __future__ import annotations

from collections.abc import Iterator

from app.core.proof_report import ProofLine, ProofReport, Verdict

MARKS = {Verdict.PASS: "PASS", Verdict.FAIL: "FAIL", Verdict.OFF: "off "}
INDENT = " " * 8
"""Where a line's evidence and fix start, under its title."""


def proof_rows(report: ProofReport, *, fixes: bool = True) -> Iterator[tuple[ProofLine, str]]:
    """Each line of the report with the fix it shows: a failed line's (with `fixes`), else
    none."""
    for line in report.lines:
        shown = fixes and line.verdict is Verdict.FAIL and line.fix
        yield line, line.fix if shown else ""


def format_report(report: ProofReport) -> str:
    """The report as plain text: a line per lever, evidence and fix indented below."""
    lines = [f"ling-chat proof ({report.summary()})"]
    ran = report.facts.get("ran_with")
    if isinstance(ran, dict) and "error" not in ran:  # what SGLang resolved, every override in
        lines.append("  engine ran with: " + ", ".join(f"{k}={v!r}" for k, v in ran.items()))
    for line, fix in proof_rows(report):
        lines.append(f"  {MARKS[line.verdict]}  {line.title}")
        lines.append(f"{INDENT}{line.evidence}")
        if fix:
            lines.append(f"{INDENT}fix: {fix}")
    lines.append("ready: every optimization is engaged" if report.ok else "refused to start")
    return "\n".join(lines)
