"""The app on a RemoteBackend (through a test double of SGLang's HTTP API): what a server
session stores."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from app.backend.remote.remote import MAX_MODEL_NAME, RemoteBackend
from app.storage import ChatStore
from app.ui import LingChatApp
from tests.backend.remote.test_remote import URL, FakeSGLangServerDouble, server_info
from tests.support.pilot import chat_screen

SIZE = (120, 40)


@pytest.mark.parametrize(
    ("reported", "stored"),
    [
        ({}, "inclusionAI/Ling-3.0-flash-fp4"),
        ({"model_path": "\x1b]0;pwned\x07ling\u202e  3\n"}, "]0;pwnedling 3"),
        ({"model_path": "m" * 5000}, "m" * (MAX_MODEL_NAME - 1) + "…"),
        ({"model_path": None, "served_model_name": "ling-served"}, "ling-served"),
    ],
)
async def test_a_server_session_stores_the_model_the_server_reports(
    make_app: Callable[..., LingChatApp], store: ChatStore, reported: dict, stored: str
) -> None:
    server = FakeSGLangServerDouble({**server_info(), **reported})
    async with httpx.AsyncClient(transport=httpx.MockTransport(server)) as client:
        backend = RemoteBackend(URL, client=client, allow_unoptimized=True)
        app = make_app(backend, allow_unoptimized=True)
        async with app.run_test(size=SIZE) as pilot:
            await chat_screen(pilot)
            assert app.engine_run_id is not None
            run = store.get_engine_run(app.engine_run_id)
    assert (run.kind, run.model, run.sglang_version) == ("server", stored, "0.5.23")
