"""What every lever's judge uses to write its proof lines from the facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.proof_report import ProofLine, Verdict
from app.levers.lever import Facts, Line

LACKING_FIX = (
    "these facts were recorded by an older ling-chat engine: start the engine again to record them"
)
"""The fix of a line whose facts an older engine did not record."""


def judged(line: Line, ok: bool, evidence: str) -> ProofLine:
    """`line` passed or failed (with its fix) on `evidence`."""
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine(line.key, line.title, verdict, evidence, "" if ok else line.fix)


def failed(line: Line, evidence: str, fix: str) -> ProofLine:
    """`line` failed with a fix of its own (not the lever's)."""
    return ProofLine(line.key, line.title, Verdict.FAIL, evidence, fix)


def off(line: Line, really_off: bool, evidence: str) -> ProofLine:
    """A lever turned off by request: OFF when verified off, FAIL when it is on anyway."""
    if really_off:
        return ProofLine(line.key, line.title, Verdict.OFF, f"off by request; {evidence}")
    return ProofLine(
        line.key, line.title, Verdict.FAIL, f"off by request but engaged: {evidence}", line.fix
    )


def error(facts: Facts, *keys: str, optional: tuple[str, ...] = ()) -> str | None:
    """Why one of the facts `keys` cannot be judged: not reported (unless `optional`, whose
    None means absent), or reported with the error that reading it raised; None if all can."""
    for key in keys:
        value = facts.get(key)
        if value is None and key not in optional:
            return f"{key}: not reported by the engine"
        if isinstance(value, Mapping) and "error" in value:
            return f"{key}: {value['error']}"
    return None


def fact(facts: Facts, key: str, absent: str) -> Mapping[str, Any] | str:
    """The fact `key`, or why it cannot be judged (`absent`: what its absence means)."""
    value = facts.get(key)
    if value is None:
        return f"{key}: not reported by the engine ({absent})"
    if "error" in value:
        return f"{key}: {value['error']}"
    return value


def lacking(
    line: Line, key: str, value: Mapping[str, Any], needed: tuple[str, ...]
) -> ProofLine | None:
    """A failed line naming the `needed` fields that the fact `key` lacks, if any."""
    missing = [name for name in needed if name not in value]
    if not missing:
        return None
    return failed(line, f"the {key} facts lack {', '.join(missing)}", LACKING_FIX)
