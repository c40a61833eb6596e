"""Finding the resident engine for these settings, and what became of it.

No state file: none. Its pid gone: stale (the file is removed). Settings that differ:
mismatch, never reused. Still loading: loading. Loaded but no answer within `ANSWER_S`:
hung. Else ready. The probe is `GET /model_info` with the key: it uses no GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import httpx

from app.backend.resident import process
from app.backend.resident.state import (
    ResidentState,
    differences,
    read_state,
    remove_state,
    settings_hash,
    state_path,
)

ANSWER_S = 5.0
"""How long a loaded engine may take to answer `/model_info` before it counts as hung."""


class Outcome(StrEnum):
    NONE = "none"
    STALE = "stale"
    MISMATCH = "mismatch"
    LOADING = "loading"
    HUNG = "hung"
    READY = "ready"


@dataclass(frozen=True, slots=True)
class Found:
    outcome: Outcome
    state: ResidentState | None = None
    detail: str = ""
    """One line for the user (stale, hung, mismatch)."""


def discover(folder: Path, settings: dict[str, Any], answer_s: float | None = None) -> Found:
    """The resident engine in `folder` as seen by a chat with these engine settings
    (`answer_s`: how long it may take to answer, default `ANSWER_S`)."""
    state = read_state(folder)
    if state is None:
        if state_path(folder).exists():
            state_path(folder).unlink(missing_ok=True)
            return Found(Outcome.STALE, None, "removed an unreadable resident-engine state file")
        return Found(Outcome.NONE)
    if not process.alive(state.pid):
        remove_state(folder, state.pid)
        return Found(
            Outcome.STALE,
            state,
            f"the resident engine (pid {state.pid}) is gone; starting a new one",
        )
    if state.settings_hash != settings_hash(settings):
        what = "; ".join(differences(settings, state.settings)) or "the engine settings"
        return Found(
            Outcome.MISMATCH,
            state,
            f"a resident engine (pid {state.pid}) runs other settings ({what}): it is not "
            "reused; `ling-chat engine stop` stops it",
        )
    if not state.ready:
        return Found(Outcome.LOADING, state)
    if problem := unanswered(state, ANSWER_S if answer_s is None else answer_s):
        return Found(
            Outcome.HUNG,
            state,
            f"the resident engine (pid {state.pid}) does not answer ({problem}): stopping it "
            "and starting a new one",
        )
    return Found(Outcome.READY, state)


def unanswered(state: ResidentState, answer_s: float) -> str:
    """Why the engine did not answer `/model_info` in time; '' when it did."""
    try:
        headers = {"Authorization": f"Bearer {state.key()}"}
        answer = httpx.get(f"{state.url}/model_info", headers=headers, timeout=answer_s)
    except OSError as exc:
        return f"its key: {exc.strerror}"
    except httpx.TimeoutException:
        return f"nothing within {answer_s:g} s"
    except httpx.HTTPError as exc:
        return type(exc).__name__
    return "" if answer.status_code == 200 else f"HTTP {answer.status_code}"
