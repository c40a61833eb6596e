"""The draft depth in use: from the running scheduler's facts first, else the server args."""

from __future__ import annotations

import pytest

from app.backend.draft import draft_in_use, from_args, from_facts
from app.backend.engine.config import EngineConfig, GpuFacts, server_args
from app.backend.engine.patches import evidence
from app.backend.protocol import DraftShape
from app.levers.profiles import PROFILES
from tests.fixtures.sglang_objects import (
    SourcesDouble,
    dspark_facts,
    plain_scheduler,
    stack_facts,
)

H200 = GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True)
SHAPES = {
    "stack": DraftShape(3, 4),
    "stack-recurrent": DraftShape(3, 4),
    "humming+nextn": DraftShape(3, 4),
    "dspark": DraftShape(1, 9, block=8),
    "stack+bf16-router": DraftShape(3, 4),
    "dspark+fp8-draft": DraftShape(1, 9, block=8),
    "stack+hot-vocab": DraftShape(3, 4),
}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_each_profile_s_server_args_ask_for_its_draft(profile: str) -> None:
    assert from_args(server_args(EngineConfig("/m", profile=profile), H200)) == SHAPES.get(profile)


def test_an_override_passed_to_sglang_is_the_draft_asked_for() -> None:
    config = EngineConfig("/m", overrides={"speculative_num_steps": 2})
    assert from_args(server_args(config, H200)) == DraftShape(2, 4)


def test_the_running_scheduler_s_facts_come_before_the_args() -> None:
    asked = server_args(EngineConfig("/m", overrides={"speculative_num_steps": 2}), H200)
    assert draft_in_use(stack_facts(), asked) == DraftShape(3, 4)
    assert draft_in_use(dspark_facts(), {}) == DraftShape(1, 9, block=8)


def test_facts_without_a_draft_leave_it_to_the_args() -> None:
    plain = evidence.collect(plain_scheduler(), SourcesDouble())
    assert from_facts(plain) is None
    unreadable = {"speculative": {"error": "AttributeError: no draft_worker"}}
    asked = server_args(EngineConfig("/m"), H200)
    assert draft_in_use(unreadable, asked) == DraftShape(3, 4)
    assert draft_in_use(plain, server_args(EngineConfig("/m", profile="baseline"), H200)) is None
