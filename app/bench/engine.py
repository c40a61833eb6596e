"""The in-process engine as `ling-chat bench` drives it: one proven engine per profile."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.bench.engine_calls import call_tokenizer_manager, generate
from app.bench.protocol import BenchSample, EngineFactory
from app.core.chat import ChatMessage, Role
from app.core.errors import BackendError, ProofFailed
from app.core.proof_report import ProofReport


class EngineBench:
    """A started EngineBackend behind the benchmark's `BenchEngine` protocol."""

    def __init__(self, backend: EngineBackend, report: ProofReport) -> None:
        self.backend = backend
        self.report = report

    async def generate(
        self,
        *,
        input_ids: list[int] | None,
        prompt: str | None,
        sampling_params: dict[str, Any],
        chat_template: Mapping[str, Any] | None = None,
    ) -> BenchSample:
        if prompt is not None and chat_template is not None:
            try:
                turn = [ChatMessage(Role.USER, prompt)]
                prompt = self.backend.chat_prompt(turn, **chat_template)
            except Exception as exc:  # the model's Jinja template, or a stopped engine
                raise BackendError(f"cannot apply the chat template: {exc}") from exc
        try:
            raw: BenchSample = await generate(
                self.backend, input_ids=input_ids, prompt=prompt, sampling_params=sampling_params
            )
        except ValueError as exc:  # SGLang refused the request (too long, bad parameters)
            raise BackendError(f"request failed: {type(exc).__name__}: {exc}") from exc
        return raw

    def describe(self) -> dict[str, Any]:
        config_file = Path(self.backend.config.model_path) / "config.json"
        return {
            "config": {**self.backend.server_kwargs, "sglang": self.backend.info.sglang_version},
            "proof": self.report.to_dict(),
            "model_config": json.loads(config_file.read_text()) if config_file.is_file() else None,
        }

    async def start_profile(self, folder: Path) -> None:
        from sglang.srt.managers.io_struct import ProfileReq

        req = ProfileReq(
            output_dir=str(folder), activities=["GPU"], with_stack=False, profile_prefix="host"
        )
        await self._profiler("start_profile", req)

    async def stop_profile(self) -> None:
        await self._profiler("stop_profile")

    async def _profiler(self, method: str, *args: Any) -> None:
        try:
            await call_tokenizer_manager(self.backend, method, *args)
        except RuntimeError as exc:  # SGLang's "profiling is already in progress" and such
            raise BackendError(f"SGLang's {method} refused: {exc}") from exc

    async def shutdown(self) -> None:
        await self.backend.shutdown()


def bench_engine_factory(config: EngineConfig, *, require_proof: bool = True) -> EngineFactory:
    """Profile name -> a started engine; refuses an unproven one unless told otherwise."""

    async def start(profile: str) -> EngineBench:
        backend = EngineBackend(dataclasses.replace(config, profile=profile))
        try:
            async for _stage in backend.start():
                pass
            report = await backend.proof()
        except BaseException:
            await backend.shutdown()
            raise
        if require_proof and not report.ok:
            await backend.shutdown()
            failed = "; ".join(f"{line.key}: {line.evidence}" for line in report.failed)
            raise ProofFailed(f"{profile} refused ({failed})")
        return EngineBench(backend, report)

    return start
