"""After a long load of the in-process engine, the app says that keep_engine exists and
what it costs; after a short one it says nothing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.backend.protocol import LoadStage
from app.commands.chat import KEEP_TIP
from app.ui import LingChatApp
from tests.support.clock import FakeClock
from tests.support.pilot import Notices, chat_screen
from tests.support.scripted_backend import ScriptedBackendDouble


@pytest.mark.parametrize(("loaded_s", "told"), [(185.0, True), (52.0, False)])
async def test_a_long_load_tells_of_keep_engine_and_its_memory_cost(
    make_app: Callable[..., LingChatApp], clock: FakeClock, loaded_s: float, told: bool
) -> None:
    stages = (
        LoadStage("Loading weights", False, 0.0),
        LoadStage("Loading weights", True, loaded_s),
    )
    backend = ScriptedBackendDouble(clock=clock, stages=stages)
    app = make_app(backend, load_tip=KEEP_TIP, proof_hold_s=0)
    notices = Notices()
    async with app.run_test(size=(100, 30), message_hook=notices) as pilot:
        await chat_screen(pilot)
        await pilot.pause()
    tips = [n for n in notices.messages if "keep_engine" in n]
    assert tips == (["The model took 3 min to load. " + KEEP_TIP] if told else [])
    assert "holds its GPU memory" in KEEP_TIP and "most of the unified memory" in KEEP_TIP
