"""What the running model really is: the proof's verdicts, one line per optimization.

Plain frozen records that the backends produce (`app.backend.proof` judges them) and that
storage and the UI read, so neither needs the engine side to show or keep a report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Verdict(StrEnum):
    """The outcome of one proof line."""

    PASS = "pass"
    FAIL = "fail"
    OFF = "off"
    """Turned off by request, and verified off."""


@dataclass(frozen=True, slots=True)
class ProofLine:
    """One optimization's verdict with the evidence read from the running model."""

    key: str
    title: str
    verdict: Verdict
    evidence: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class ProofReport:
    """What the running model really is, line by line."""

    profile: str
    lines: tuple[ProofLine, ...]
    facts: Mapping[str, Any] = field(default_factory=dict)
    """The raw evidence the lines were judged from (JSON-serialisable)."""

    @property
    def ok(self) -> bool:
        """True when no line failed."""
        return all(line.verdict is not Verdict.FAIL for line in self.lines)

    @property
    def failed(self) -> tuple[ProofLine, ...]:
        """The lines that failed."""
        return tuple(line for line in self.lines if line.verdict is Verdict.FAIL)

    def summary(self) -> str:
        """One line, e.g. `stack: 8 pass, 0 fail, 0 off`."""
        counts = {v: sum(line.verdict is v for line in self.lines) for v in Verdict}
        return (
            f"{self.profile}: {counts[Verdict.PASS]} pass, "
            f"{counts[Verdict.FAIL]} fail, {counts[Verdict.OFF]} off"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; `from_dict` reads it back."""
        return {
            "profile": self.profile,
            "lines": [asdict(line) for line in self.lines],
            "facts": dict(self.facts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProofReport:
        """Rebuild a report written by `to_dict`."""
        lines = tuple(
            ProofLine(**{**line, "verdict": Verdict(line["verdict"])}) for line in data["lines"]
        )
        return cls(profile=data["profile"], lines=lines, facts=dict(data.get("facts", {})))
