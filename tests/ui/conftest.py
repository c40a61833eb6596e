"""Fixtures for the UI tests: a fake clock, the scripted backend double, a real store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.chat import Sampling
from app.storage import ChatStore
from app.ui import LingChatApp
from tests.support.clock import FakeClock
from tests.support.scripted_backend import ScriptedBackendDouble


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(clock: FakeClock) -> ScriptedBackendDouble:
    return ScriptedBackendDouble(clock=clock)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "history.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[ChatStore]:
    """The app's store; a locked file fails its writes after 0.2 s."""
    with ChatStore.open(db_path, busy_timeout_s=0.2) as opened:
        yield opened


@pytest.fixture
def make_app(store: ChatStore, clock: FakeClock, end_to_end: None) -> Callable[..., LingChatApp]:
    """Build the app around a backend, to run under Pilot (an end-to-end test); start-up
    does not pause on the proof."""

    def make(backend: ScriptedBackendDouble, **options: Any) -> LingChatApp:
        options = {"sampling": Sampling(), "clock": clock, "proof_hold_s": 0, **options}
        return LingChatApp(backend, store, **options)

    return make


@pytest.fixture
def chat_app(make_app: Callable[..., LingChatApp], backend: ScriptedBackendDouble) -> LingChatApp:
    return make_app(backend)
