"""`ChatContext`: what the chat screen works with, handed over once start-up succeeded."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.backend.protocol import ChatBackend
from app.core.chat import Sampling
from app.core.proof_report import ProofReport
from app.prefs.presets import PresetFile
from app.storage import ChatStore
from app.ui.recovery import RecoveryFile


@dataclass(frozen=True, slots=True)
class ChatContext:
    """What the chat screen works with, handed over by the app once start-up succeeded."""

    backend: ChatBackend
    store: ChatStore
    proof: ProofReport
    default_sampling: Sampling
    engine_run_id: int | None
    clock: Callable[[], float]
    keymap: Mapping[str, str] = field(default_factory=dict)
    refresh_hz: float = 15.0
    """How often streamed text and live numbers are drawn."""
    recovery: RecoveryFile | None = None
    """Where replies the history cannot take are kept meanwhile (None: nowhere)."""
    presets: PresetFile | None = None
    """The presets file (None: no presets)."""
    reply_finished: Callable[[], None] | None = None
    """Called whenever a reply ends (the app's notice while it is not focused)."""
