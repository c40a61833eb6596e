"""The banner above the transcript: a warning, else whether the optimizations were proven."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from app.core.proof_report import ProofReport
from app.telemetry.health import CollapseVerdict, SpecHealth
from app.textsafe import visible


class Banner(Static):
    """One warning line; hidden when there is nothing to warn about."""

    def __init__(self, proof: ProofReport, proof_keys: str, *, id: str | None = None) -> None:
        super().__init__("", id=id)
        self._proof = proof
        self._proof_keys = proof_keys
        """The keys that show the proof report."""

    def warn(self, warning: str | None) -> None:
        """Show a warning; None falls back to the proof's state."""
        if warning is None and not self._proof.ok:
            why = self._proof_keys
            warning = f"Optimizations not proven ({self._proof.summary()}): {why} shows why."
        self.display = warning is not None
        self.update(Text(visible(f"⚠ {warning}") if warning else ""))

    def show_verdict(self, verdict: CollapseVerdict) -> None:
        """Warn of a flagged verdict; an OK one clears the warning, others leave it."""
        if verdict.flagged:
            self.warn(verdict.message)
        elif verdict.status is SpecHealth.OK:
            self.warn(None)
