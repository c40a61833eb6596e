"""The bench's engine adapter: a chat-template request is rendered with its template arguments;
a request SGLang refuses is a failed request, and a bug stays a bug.

SGLang is replaced by `TemplateEngineDouble` (the user never sees it); the engine thread and
EngineBackend's template rendering are the real ones.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.backend.engine.thread import EngineThread
from app.bench.engine import EngineBench
from app.core.errors import BackendError
from app.core.proof_report import ProofReport


class TemplateTokenizerDouble:
    """A chat template that opens a reasoning block only when thinking is on."""

    def apply_chat_template(
        self, turns: list[dict[str, str]], *, enable_thinking: bool = True, **_: Any
    ) -> str:
        body = "".join(f"<{t['role']}>{t['content']}" for t in turns)
        return body + ("<assistant><think>" if enable_thinking else "<assistant>")


class TemplateEngineDouble:
    """Records the prompt of each request and answers with one finished chunk."""

    def __init__(self) -> None:
        self.prompts: list[str | None] = []
        self.tokenizer_manager = types.SimpleNamespace(tokenizer=TemplateTokenizerDouble())

    async def async_generate(self, *, prompt: str | None, **_: Any) -> Any:
        self.prompts.append(prompt)

        async def chunks() -> Any:
            meta = {"completion_tokens": 1, "finish_reason": {"type": "stop"}}
            yield {"text": "7", "meta_info": meta}

        return chunks()


async def test_chat_template_arguments_reach_the_template(tmp_path: Any) -> None:
    engine = TemplateEngineDouble()
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    backend._engine, backend._thread = engine, EngineThread()
    bench = EngineBench(backend, ProofReport("stack", ()))
    params = {"max_new_tokens": 4}
    await bench.generate(input_ids=None, prompt="2+5?", sampling_params=params)
    await bench.generate(
        input_ids=None,
        prompt="2+5?",
        sampling_params=params,
        chat_template={"enable_thinking": True},
    )
    await bench.generate(
        input_ids=None,
        prompt="2+5?",
        sampling_params=params,
        chat_template={"enable_thinking": False},
    )
    await backend.shutdown()
    assert engine.prompts == ["2+5?", "<user>2+5?<assistant><think>", "<user>2+5?<assistant>"]


class RefusingEngineDouble(TemplateEngineDouble):
    """Raises `error` from `async_generate`, as SGLang's validation does."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def async_generate(self, *, prompt: str | None, **_: Any) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "raised"),
    [
        (
            ValueError("The input (40000 tokens) is longer than the model's context length"),
            BackendError,
        ),
        (KeyError("meta_info"), KeyError),
    ],
)
async def test_only_a_refused_request_becomes_a_failed_request(
    tmp_path: Any, error: Exception, raised: type[Exception]
) -> None:
    backend = EngineBackend(EngineConfig("/m", log_dir=tmp_path))
    backend._engine, backend._thread = RefusingEngineDouble(error), EngineThread()
    bench = EngineBench(backend, ProofReport("stack", ()))
    try:
        with pytest.raises(raised) as caught:
            await bench.generate(input_ids=[1, 2], prompt=None, sampling_params={})
    finally:
        await backend.shutdown()
    if raised is BackendError:
        assert str(caught.value) == f"request failed: ValueError: {error}"
    else:
        assert caught.value is error
