"""The real app on the resident engine (the resident double in a real process): each stored
reply records that a resident engine measured it, with its accept length as measured on
the in-process engine; quitting leaves the engine loaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import launch
from app.backend.remote.resident import ResidentBackend
from app.backend.resident import process
from app.core.chat import Sampling
from app.core.proof_report import Verdict
from app.storage import ChatStore, MessageStatus
from app.ui import LingChatApp
from tests.fixtures.engine_double import resident_double
from tests.support import resident
from tests.support.pilot import chat_screen, reply_done, send
from tests.support.resident import plan_for

world = resident.world


async def test_a_reply_from_the_resident_engine_is_stored_as_the_residents(world: Path) -> None:
    backend = launch.resident_backend(plan_for(world))
    assert isinstance(backend, ResidentBackend)
    with ChatStore.open(world / "history.db") as store:
        app = LingChatApp(backend, store, sampling=Sampling(), proof_hold_s=0)
        async with app.run_test(size=(100, 30)) as pilot:
            await chat_screen(pilot)
            await send(pilot, "hello")
            await reply_done(pilot)
            proof = await backend.proof()
            await app.action_quit()
        (measured,) = store.measured_replies()
    assert measured.status is MessageStatus.COMPLETE
    assert measured.run is not None and measured.run.kind == "resident"
    assert proof.profile == "stack" and proof.ok and len(proof.lines) > 1
    assert {line.verdict for line in proof.lines} == {Verdict.PASS}
    assert measured.run.proof_summary == proof.summary()
    # Both requests of the reply (the thinking's one token, stopped at `</think>`, and the
    # answer's): SGLang's convention counts every token over the verify rounds.
    thought, answered = 1, resident_double.REPLY_TOKENS
    rounds = resident_double.SPEC["spec_verify_ct"]
    assert measured.stats.accept_length == pytest.approx((thought + answered) / rounds)
    assert process.alive(backend.pid), "quitting the chat leaves the engine loaded"
