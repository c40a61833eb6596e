"""The in-process SGLang engine with ling-chat's model changes, behind `ChatBackend`.

SGLang's Engine runs on a thread of its own (app/backend/engine/thread.py); the UI's loop
gets events through a queue. The scheduler runs ling-chat's entry function
(app/backend/engine/patches), so the FP8 head, the shared draft head and the proof collector
exist inside the process that runs the model.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from app.backend.draft import draft_in_use
from app.backend.engine.boot.boot_log import LOAD_STAGE, BootLog
from app.backend.engine.boot.load_progress import LoadProgress, progress_stage, read_progress
from app.backend.engine.config import EngineConfig, draft_models, server_args
from app.backend.engine.download_stage import engine_downloads, refuse_unloadable_download
from app.backend.engine.kernel_cache import invalid_image_hint
from app.backend.engine.patches.boundary import PLAN_ENV, REFUSAL, PatchPlan
from app.backend.engine.reply import ReplyRun, chat_prompt, produce_reply, reply_plan
from app.backend.engine.setup import (
    check_load_format,
    check_model_path,
    engine_class,
    engine_missing,
    gpu_facts,
    set_engine_environment,
    sglang_version,
)
from app.backend.engine.sglang_log import SGLangLog, last_error
from app.backend.engine.sglang_processes import EngineProcesses, close_ipc, start_resource_tracker
from app.backend.engine.thread import EngineThread, until_crashed
from app.backend.proof import PROOF_KEY, build_report, refusal_report
from app.backend.protocol import BackendInfo, LoadStage, ReplyDone, ReplyError, ReplyEvent
from app.backend.warmup import PLAN, warm_up
from app.core.chat import DEFAULT_THINKING, ChatMessage, PartialReply, Sampling, Thinking
from app.core.errors import BackendError, ContextFull, EngineCrashed
from app.core.proof_report import ProofReport

T = TypeVar("T")
ABORT_WAIT_S = 2.0
"""How long a stop waits for the engine loop to take the abort."""
WARMUP_STAGE = "Warming up and measuring accept length"


class EngineBackend:
    """Ling-3.0-flash on SGLang 0.5.23 in this process, proven before use."""

    def __init__(
        self, config: EngineConfig, *, scheduler_entry: Callable[..., None] | None = None
    ) -> None:
        """Args:
        config: what to run.
        scheduler_entry: a module-level function replacing ling-chat's scheduler entry
            (GPU tests only; it must install ling-chat's patches itself).
        """
        self.config = config
        self._scheduler_entry = scheduler_entry
        self._thread: EngineThread | None = None
        self._engine: Any = None
        self.processes = EngineProcesses()
        """The SGLang processes this engine's boot spawned."""
        self.log = SGLangLog((config.log_dir or Path.cwd()) / "sglang.log")
        self._report: ProofReport | None = None
        self._run: ReplyRun | None = None
        self._version = "unknown"
        self.server_kwargs: dict[str, Any] = {}
        """The SGLang server arguments of the running engine."""
        self.progress_file = self.log.path.with_name("load-progress.json")
        """Where the scheduler writes the weight load's progress."""
        self.load_progress: LoadProgress | None = None
        """The load's latest progress record; after start-up, its seconds by stage."""

    @property
    def info(self) -> BackendInfo:
        """Static facts about this backend."""
        return BackendInfo(
            kind="engine",
            model=self.config.model_path,
            sglang_version=self._version,
            profile=self.config.profile,
            speculative=self.config.levers.speculative,
            context_length=(
                int(self._engine.tokenizer_manager.context_len)
                if self._engine is not None
                else None
            ),
            draft=draft_in_use(
                self._report.facts if self._report is not None else {}, self.server_kwargs
            ),
        )

    @property
    def log_file(self) -> Path:
        """Where SGLang and its child processes write."""
        return self.log.path

    async def start(self) -> AsyncIterator[LoadStage]:
        """Import SGLang, boot the engine, warm it up and judge the proof."""
        t0 = time.perf_counter()

        def stage(name: str, done: bool, detail: str = "") -> LoadStage:
            return LoadStage(name, done, time.perf_counter() - t0, detail)

        check_model_path(self.config.model_path, draft_models([self.config]))
        set_engine_environment()  # before SGLang's modules read it at import
        yield stage("Importing SGLang", False)
        self._thread = EngineThread()
        try:
            engine_cls = await self._thread.call(lambda: engine_class(self._scheduler_entry))
            gpu = await self._thread.call(gpu_facts)
        except ImportError as exc:
            raise engine_missing(exc) from exc
        yield stage("Importing SGLang", True)
        async for fetched in engine_downloads(self.config, t0):
            yield fetched
        await asyncio.to_thread(refuse_unloadable_download, self.config)  # headers: under 1 s
        environment = self._boot_environment()
        self.processes.watch()
        kwargs = self.server_kwargs = server_args(self.config, gpu)
        check_load_format(kwargs)
        yield stage(LOAD_STAGE, False, f"log: {self.log_file}")
        start_resource_tracker()  # before the boot: the tracker is not SGLang's to stop
        spawn = self.processes.boot
        boot = asyncio.ensure_future(
            self._thread.call(lambda: spawn(lambda: engine_cls(**kwargs), environment))
        )
        # Quitting mid-load stops SGLang's children, and the boot then fails with nobody
        # left to await it: its error is expected, not a stray traceback at exit.
        boot.add_done_callback(lambda done: done.cancelled() or done.exception())
        boot_log = BootLog()  # this boot's part of the log (the file is kept across runs)
        with self.log.following() as log:
            while not boot.done():
                await asyncio.wait({boot}, timeout=0.5)
                boot_log.feed(log.read())
                self.load_progress = read_progress(self.progress_file)
                elapsed = time.perf_counter() - t0
                if shown := progress_stage(LOAD_STAGE, self.load_progress, elapsed):
                    yield shown  # the weight load's own progress, while it is known
                elif boot_log.latest is not None:
                    yield stage(LOAD_STAGE, False, boot_log.latest)
            boot_log.feed(log.read())
        self.load_progress = read_progress(self.progress_file)
        try:
            self._engine = boot.result()
        except Exception as exc:
            log_text = boot_log.text[-20000:]
            if refusal := self._refusal(exc, log_text):
                self._report = refusal
                yield stage(LOAD_STAGE, True, "refused")
                return
            cause = last_error(log_text) or f"{type(exc).__name__}: {exc}"
            hint = invalid_image_hint(cause, os.environ)
            raise EngineCrashed(
                f"SGLang failed to start ({cause}){hint}; see {self.log_file}"
            ) from exc
        atexit.unregister(self._engine.shutdown)
        self._version = await self._thread.call(sglang_version)
        yield stage(LOAD_STAGE, True)
        yield stage(WARMUP_STAGE, False, PLAN)
        accept = await warm_up(self, EngineCrashed)
        yield stage(
            WARMUP_STAGE, True, "no speculation" if accept is None else f"accept {accept:.2f}"
        )
        facts = self._engine._scheduler_init_result.scheduler_infos[0].get(PROOF_KEY, {})
        self._report = build_report(
            facts,
            profile=self.config.profile,
            min_accept_length=self.config.min_accept_length,
            warmup_accept_length=accept,
        )

    async def proof(self) -> ProofReport:
        """The report judged at start-up."""
        if self._report is None:
            raise BackendError("the engine has not been started")
        return self._report

    async def stream_reply(
        self,
        messages: Sequence[ChatMessage],
        sampling: Sampling,
        *,
        thinking: Thinking = DEFAULT_THINKING,
        partial: PartialReply | None = None,
    ) -> AsyncIterator[ReplyEvent]:
        """Stream a reply through SGLang's async_generate, reasoning split from the answer,
        the thinking held to its budget; `partial`: the reply to continue (it follows the
        generation prompt as the model wrote it, and the events carry only what is new)."""
        if self._engine is None or self._thread is None:
            raise BackendError("the engine is not running")
        if (crash := self._crash()) is not None:
            yield ReplyError(crash, time.perf_counter())
            return
        manager = self._engine.tokenizer_manager
        try:
            plan = await self._thread.call(
                lambda: reply_plan(manager, messages, sampling, thinking, partial)
            )
        except ContextFull as exc:
            yield ReplyError(str(exc), time.perf_counter())
            return
        queue: asyncio.Queue[ReplyEvent] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        run = self._run = ReplyRun(uuid.uuid4().hex)
        produce = self._thread.submit(
            produce_reply(
                self._engine,
                plan,
                sampling,
                run,
                lambda e: loop.call_soon_threadsafe(queue.put_nowait, e),
                self._failure,
            )
        )
        try:
            while True:
                try:
                    event = await until_crashed(queue.get(), self._crash)
                except EngineCrashed as exc:  # SGLang's stream would wait forever
                    event = ReplyError(str(exc), time.perf_counter())
                yield event
                if isinstance(event, ReplyDone | ReplyError):
                    break
        finally:
            self._run = None
            if not produce.done():  # the consumer left early: abort the request
                await self.stop_run(run)
            if not self.processes.crashed():  # a dead scheduler never ends the request
                await asyncio.wait({asyncio.ensure_future(produce)}, timeout=5)

    async def on_engine(self, work: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
        """Await `work(engine)` on the engine loop, given SGLang's running Engine.

        For measurement code (app/bench/engine_calls.py); cancelling the await cancels `work`.

        Raises:
            BackendError: the engine is not running.
            EngineCrashed: SGLang's scheduler died before or during `work`.
        """
        if self._engine is None or self._thread is None:
            raise BackendError("the engine is not running")
        if (crash := self._crash()) is not None:
            raise EngineCrashed(crash)
        return await until_crashed(self._thread.submit(work(self._engine)), self._crash)

    async def stop_reply(self) -> None:
        """Abort the reply in flight; its stream ends with finish reason `abort`."""
        if self._run is not None:
            await self.stop_run(self._run)

    async def stop_run(self, run: ReplyRun) -> None:
        """Abort the reply `run` on the engine loop (zmq sockets are not thread-safe): its
        request now, and no request after it.

        Waits at most ABORT_WAIT_S: an engine loop that hangs must not hang a stop, nor the
        quit that stops the reply in flight before shutting SGLang down.
        """
        if self._engine is not None and self._thread is not None:
            manager = self._engine.tokenizer_manager

            def abort() -> None:
                run.stopped = True
                manager.abort_request(run.request)

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._thread.call(abort), ABORT_WAIT_S)

    async def shutdown(self) -> None:
        """Stop SGLang's own processes (never any other child of this app)."""
        engine, self._engine = self._engine, None
        if engine is not None:
            # Stopped first, or it would kill this process when SGLang's children go; from
            # a worker thread, so that an engine loop that hangs cannot hang the quit.
            watchdog = getattr(engine.tokenizer_manager, "_subprocess_watchdog", None)
            if watchdog is not None:
                await asyncio.to_thread(watchdog.stop)
            if self._thread is not None:  # on the loop that owns the sockets
                closing = self._thread.call(lambda: close_ipc(engine, engine.tokenizer_manager))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(closing, ABORT_WAIT_S)
        await asyncio.to_thread(self.processes.stop)  # also when quitting mid-load
        if self._thread is not None:
            await asyncio.to_thread(self._thread.stop)
            self._thread = None

    def chat_prompt(self, messages: Sequence[ChatMessage], **template: Any) -> str:
        """The prompt text from the model's own chat template (`template`: its arguments,
        e.g. `enable_thinking=True`)."""
        return chat_prompt(self._engine.tokenizer_manager.tokenizer, messages, **template)

    def _failure(self, exc: Exception) -> str:
        """The one-line error of a request that raised `exc`."""
        crashed = " (SGLang's scheduler died)" if self.processes.crashed() else ""
        return f"{type(exc).__name__}: {exc}{crashed}; see {self.log_file}"

    def _boot_environment(self) -> dict[str, str]:
        """What this engine's SGLang processes inherit: the log's config and the patch plan."""
        self.progress_file.unlink(missing_ok=True)  # an earlier boot's
        plan = PatchPlan.for_profile(
            self.config.levers, str(self.log_file), str(self.progress_file)
        )
        return {**self.log.prepare(), PLAN_ENV: plan.to_env()}

    def _crash(self) -> str | None:
        """Why SGLang's scheduler is gone, with the cause from this boot's log; None if not."""
        return self.log.crash_message() if self.processes.crashed() else None

    def _refusal(self, exc: BaseException, log_text: str) -> ProofReport | None:
        """A `boundary.refusal` raised in the scheduler, as a failed proof report."""
        if match := REFUSAL.search(f"{exc}\n{log_text}"):
            return refusal_report(self.config.profile, match.group(1), match.group(2).strip())
        return None
