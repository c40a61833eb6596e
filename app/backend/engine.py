"""The in-process SGLang engine with ling-chat's model changes, behind `ChatBackend`.

SGLang's Engine is built and driven on a thread of its own with its own event loop
(its tokenizer manager binds to the loop of its first request); the UI's loop gets
events through a queue. The scheduler runs ling-chat's entry function
(app/backend/patches), so the FP8 head, the shared draft head and the proof
collector exist inside the process that runs the model.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from app.backend.boot_log import LOAD_STAGE, BootLog
from app.backend.download import Progress, fetch_checkpoint, is_hub_id
from app.backend.engine_config import (
    REASONING_PARSER,
    EngineConfig,
    GpuFacts,
    chat_template_kwargs,
    engine_environment,
    server_args,
)
from app.backend.patches import PLAN_ENV, REFUSAL, PatchPlan
from app.backend.proof import build_report, refusal_report
from app.backend.protocol import (
    BackendInfo,
    LoadStage,
    ProofReport,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
    TimedGeneration,
)
from app.backend.warmup import PLAN, warm_up
from app.backend.wire import chat_messages
from app.chat import ChatMessage, Sampling, fit_to_context
from app.errors import BackendError, EngineCrashed, ModelNotFound
from app.files import private_dir, private_file

T = TypeVar("T")
CRASH_POLL_S = 0.5
"""How often a request in flight checks whether SGLang's scheduler died (SIGQUIT)."""
ABORT_WAIT_S = 2.0
"""How long a stop waits for the engine loop to take the abort."""
DOWNLOAD_STAGE = "Downloading the checkpoint"
WARMUP_STAGE = "Warming up and measuring accept length"


ENGINE_PACKAGES = ("sglang", "torch", "humming")
"""The packages of the `engine` extra: missing one is an install problem, not a bug."""


def engine_missing(exc: ImportError) -> BackendError:
    """The one-line error for a missing engine package; a missing other module re-raises."""
    if (exc.name or "").split(".")[0] not in ENGINE_PACKAGES:
        raise exc
    return BackendError(
        f"the engine is not installed ({exc.name} missing): pip install 'ling-chat[engine]'"
    )


def check_model_path(model_path: str) -> None:
    """Fail fast on a local path that is missing or holds no config.json.

    Raises:
        ModelNotFound: one line naming the path.
    """
    if is_hub_id(model_path):
        return  # fetched into the Hugging Face cache at start-up (app/backend/download.py)
    path = Path(model_path).expanduser()
    if not path.is_dir():
        raise ModelNotFound(f"model path {path} does not exist")
    if not (path / "config.json").is_file():
        raise ModelNotFound(f"model path {path} has no config.json")


def logging_config(log_file: Path) -> dict[str, Any]:
    """A dictConfig that sends every SGLang process's logging to `log_file`."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": "%(asctime)s %(process)d %(name)s: %(message)s"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "filename": str(log_file),
                "formatter": "plain",
            }
        },
        "root": {"level": "INFO", "handlers": ["file"]},
    }


def set_engine_environment() -> None:
    """The engine's variables in this process, which SGLang's processes inherit; a
    variable the user has set keeps its value."""
    for name, value in engine_environment().items():
        os.environ.setdefault(name, value)


def gpu_facts() -> GpuFacts:
    """What this GPU and the installed kernels allow."""
    import importlib.util

    import torch

    try:
        major, minor = torch.cuda.get_device_capability()
    except (RuntimeError, AssertionError) as exc:  # no driver, no device, a CPU-only torch
        raise BackendError(f"no usable CUDA GPU: {exc}") from exc
    has_fa3 = False
    try:
        import sgl_kernel.flash_ops  # noqa: F401

        has_fa3 = True
    except ImportError:
        pass
    return GpuFacts(
        sm=major * 10 + minor,
        has_fa3=has_fa3,
        has_flashinfer=importlib.util.find_spec("flashinfer") is not None,
        has_xgrammar=importlib.util.find_spec("xgrammar") is not None,
    )


def engine_class(scheduler_entry: Callable[..., None] | None = None) -> type:
    """SGLang's Engine with ling-chat's scheduler and detokenizer entries."""
    from sglang.srt.entrypoints.engine import Engine

    from app.backend import patches

    class LingEngine(Engine):
        run_scheduler_process_func = staticmethod(scheduler_entry or patches.run_scheduler_process)
        run_detokenizer_process_func = staticmethod(patches.run_detokenizer_process)

    return LingEngine


class EngineThread:
    """A daemon thread running an event loop that owns one SGLang Engine."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        self.loop.run_forever()
        self.loop.close()  # after stop(): its selector and self-pipe go with it

    def submit(self, coro: Coroutine[Any, Any, T]) -> asyncio.Future[T]:
        """Run `coro` on the engine loop; await the result from any loop."""
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def call(self, fn: Callable[[], T]) -> Awaitable[T]:
        """Run a blocking `fn` on the engine thread (it blocks that loop meanwhile)."""

        async def run() -> T:
            return fn()

        return self.submit(run())

    def stop(self) -> None:
        """Cancel what still runs on the loop, stop and close it, and wait for the thread.

        A reply whose scheduler died never ends by itself: it is cancelled here.
        """

        def cancel_then_stop() -> None:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.call_soon(self.loop.stop)  # after the cancelled tasks have unwound

        self.loop.call_soon_threadsafe(cancel_then_stop)
        self._thread.join(timeout=5)


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
        self._children_before: set[int] | None = None
        """This process's children before SGLang started: the rest are SGLang's."""
        self._report: ProofReport | None = None
        self._rid: str | None = None
        self._crashed = threading.Event()
        self._log_start = 0
        """Where this boot's part of the log file begins (the file is kept across runs)."""
        self._version = "unknown"
        self.server_kwargs: dict[str, Any] = {}
        """The SGLang server arguments of the running engine."""

    @property
    def info(self) -> BackendInfo:
        """Static facts about this backend."""
        return BackendInfo(
            kind="engine",
            model=self.config.model_path,
            sglang_version=self._version,
            profile=self.config.profile,
            speculative=self.config.levers.nextn,
            context_length=(
                int(self._engine.tokenizer_manager.context_len)
                if self._engine is not None
                else None
            ),
        )

    @property
    def log_file(self) -> Path:
        """Where SGLang and its child processes write."""
        log_dir = self.config.log_dir or Path.cwd()
        return log_dir / "sglang.log"

    async def start(self) -> AsyncIterator[LoadStage]:
        """Import SGLang, boot the engine, warm it up and judge the proof."""
        t0 = time.perf_counter()

        def stage(name: str, done: bool, detail: str = "") -> LoadStage:
            return LoadStage(name, done, time.perf_counter() - t0, detail)

        check_model_path(self.config.model_path)
        set_engine_environment()  # before SGLang's modules read it at import
        yield stage("Importing SGLang", False)
        self._thread = EngineThread()
        try:
            engine_cls = await self._thread.call(lambda: engine_class(self._scheduler_entry))
            gpu = await self._thread.call(gpu_facts)
        except ImportError as exc:
            raise engine_missing(exc) from exc
        yield stage("Importing SGLang", True)
        if is_hub_id(self.config.model_path):
            async for fetched in self._download(t0):
                yield fetched
        self._prepare_environment()
        self._install_sigquit_handler()
        kwargs = self.server_kwargs = server_args(self.config, gpu)
        yield stage(LOAD_STAGE, False, f"log: {self.log_file}")
        start_resource_tracker()  # before the census: the tracker is not SGLang's to stop
        self._children_before = _children()
        boot = asyncio.ensure_future(self._thread.call(lambda: engine_cls(**kwargs)))
        # Quitting mid-load stops SGLang's children, and the boot then fails with nobody
        # left to await it: its error is expected, not a stray traceback at exit.
        boot.add_done_callback(lambda done: done.cancelled() or done.exception())
        boot_log = BootLog()  # this boot's part of the log (the file is kept across runs)
        with open(self.log_file, encoding="utf-8", errors="replace") as log:
            self._log_start = log.seek(0, os.SEEK_END)
            while not boot.done():
                await asyncio.wait({boot}, timeout=0.5)
                boot_log.feed(log.read())
                if boot_log.latest is not None:
                    yield stage(LOAD_STAGE, False, boot_log.latest)
            boot_log.feed(log.read())
        try:
            self._engine = boot.result()
        except Exception as exc:
            log_text = boot_log.text[-20000:]
            if refusal := self._refusal(exc, log_text):
                self._report = refusal
                yield stage(LOAD_STAGE, True, "refused")
                return
            cause = last_error(log_text)
            raise EngineCrashed(
                f"SGLang failed to start ({cause or f'{type(exc).__name__}: {exc}'}); "
                f"see {self.log_file}"
            ) from exc
        atexit.unregister(self._engine.shutdown)
        self._version = await self._thread.call(_sglang_version)
        yield stage(LOAD_STAGE, True)
        yield stage(WARMUP_STAGE, False, PLAN)
        accept = await warm_up(self, EngineCrashed)
        yield stage(
            WARMUP_STAGE, True, "no speculation" if accept is None else f"accept {accept:.2f}"
        )
        facts = self._engine._scheduler_init_result.scheduler_infos[0].get("ling_chat_proof", {})
        self._report = build_report(
            facts,
            profile=self.config.profile,
            min_accept_length=self.config.min_accept_length,
            warmup_accept_length=accept,
        )

    async def _download(self, t0: float) -> AsyncIterator[LoadStage]:
        """Fetch what the Hugging Face cache lacks, with its progress (see `fetch_checkpoint`)."""
        loop = asyncio.get_running_loop()
        updates: asyncio.Queue[Progress] = asyncio.Queue()

        def report(progress: Progress) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed: the app quit
                loop.call_soon_threadsafe(updates.put_nowait, progress)

        model = self.config.model_path
        fetch = in_daemon_thread(lambda: fetch_checkpoint(model, report))
        yield LoadStage(DOWNLOAD_STAGE, False, time.perf_counter() - t0, "checking the cache")
        while not fetch.done():
            await asyncio.wait({fetch}, timeout=0.25)
            latest = None
            while not updates.empty():
                latest = updates.get_nowait()
            if latest is not None:
                elapsed = time.perf_counter() - t0
                yield LoadStage(
                    DOWNLOAD_STAGE, False, elapsed, latest.line(), latest.done, latest.total
                )
        fetch.result()
        yield LoadStage(DOWNLOAD_STAGE, True, time.perf_counter() - t0, "in the cache")

    async def proof(self) -> ProofReport:
        """The report judged at start-up."""
        if self._report is None:
            raise BackendError("the engine has not been started")
        return self._report

    async def stream_reply(
        self, messages: Sequence[ChatMessage], sampling: Sampling
    ) -> AsyncIterator[ReplyEvent]:
        """Stream a reply through SGLang's async_generate, reasoning split from the answer."""
        if self._engine is None or self._thread is None:
            raise BackendError("the engine is not running")
        if self._crashed.is_set():
            yield ReplyError(self._crash_message(), time.perf_counter())
            return
        input_ids, context = await self._thread.call(lambda: self._prompt_ids(messages))
        used = len(input_ids) + self._engine.tokenizer_manager.num_reserved_tokens
        fitted = fit_to_context(sampling, used, context)
        if isinstance(fitted, str):
            yield ReplyError(fitted, time.perf_counter())
            return
        queue: asyncio.Queue[ReplyEvent] = asyncio.Queue()
        loop = asyncio.get_running_loop()
        rid = self._rid = uuid.uuid4().hex
        produce = self._thread.submit(
            self._produce(
                input_ids,
                fitted.as_sglang(),
                rid,
                lambda e: loop.call_soon_threadsafe(queue.put_nowait, e),
            )
        )
        getter: asyncio.Future[ReplyEvent] | None = None
        try:
            while True:
                getter = getter or asyncio.ensure_future(queue.get())
                await asyncio.wait({getter}, timeout=CRASH_POLL_S)
                if getter.done():
                    event, getter = getter.result(), None
                elif self._crashed.is_set():  # SGLang's stream would wait forever
                    event = ReplyError(self._crash_message(), time.perf_counter())
                else:
                    continue
                yield event
                if isinstance(event, ReplyDone | ReplyError):
                    break
        finally:
            if getter is not None:
                getter.cancel()
            self._rid = None
            if not produce.done():  # the consumer left early: abort the request
                await self.stop_reply_for(rid)
            if not self._crashed.is_set():  # a dead scheduler never ends the request
                await asyncio.wait({asyncio.ensure_future(produce)}, timeout=5)

    async def generate(
        self,
        *,
        sampling_params: dict[str, Any],
        input_ids: list[int] | None = None,
        prompt: str | None = None,
    ) -> TimedGeneration:
        """One streamed request from token ids or raw text, timed on the engine thread.

        Raises:
            EngineCrashed: SGLang's scheduler died before or during the request.
        """
        if self._engine is None or self._thread is None:
            raise BackendError("the engine is not running")
        if self._crashed.is_set():
            raise EngineCrashed(self._crash_message())
        engine = self._engine

        async def run() -> TimedGeneration:
            started = time.perf_counter()
            arrivals: list[float] = []
            chunk: dict[str, Any] = {}
            tokens = 0
            stream = await engine.async_generate(
                prompt=prompt, input_ids=input_ids, sampling_params=sampling_params, stream=True
            )
            async for chunk in stream:
                now = time.perf_counter()
                if (count := chunk.get("meta_info", {}).get("completion_tokens", 0)) > tokens:
                    tokens = count
                    arrivals.append(now)
            meta = _jsonable(chunk.get("meta_info", {}))
            return TimedGeneration(
                started, arrivals, chunk.get("text", ""), meta, time.perf_counter()
            )

        return await self._unless_crashed(self._thread.submit(run()))

    async def call_tokenizer_manager(self, method: str, *args: Any) -> Any:
        """Await `engine.tokenizer_manager.<method>(*args)` on the engine loop.

        For measurement scripts (`scripts/gpu_stack_ab.py` profiles through it).
        """
        if self._engine is None or self._thread is None:
            raise BackendError("the engine is not running")
        return await self._thread.submit(getattr(self._engine.tokenizer_manager, method)(*args))

    async def stop_reply(self) -> None:
        """Abort the reply in flight; its stream ends with finish reason `abort`."""
        if self._rid is not None:
            await self.stop_reply_for(self._rid)

    async def stop_reply_for(self, rid: str) -> None:
        """Abort request `rid` on the engine loop (zmq sockets are not thread-safe).

        Waits at most ABORT_WAIT_S: an engine loop that hangs must not hang a stop, nor the
        quit that stops the reply in flight before shutting SGLang down.
        """
        if self._engine is not None and self._thread is not None:
            engine = self._engine
            abort = self._thread.call(lambda: engine.tokenizer_manager.abort_request(rid))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(abort, ABORT_WAIT_S)

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
        if self._children_before is not None:  # also when quitting mid-load
            pids = sorted(_children() - self._children_before)
            self._children_before = None
            await asyncio.to_thread(_stop_processes, pids)
        if self._thread is not None:
            await asyncio.to_thread(self._thread.stop)
            self._thread = None

    def chat_prompt(self, messages: Sequence[ChatMessage], **template: Any) -> str:
        """The prompt text from the model's own chat template (`template`: its arguments,
        e.g. `enable_thinking=True`)."""
        tokenizer = self._engine.tokenizer_manager.tokenizer
        turns = chat_messages(messages)
        return str(
            tokenizer.apply_chat_template(
                turns,
                tokenize=False,
                add_generation_prompt=True,
                **{**chat_template_kwargs(), **template},
            )
        )

    def _prompt_ids(self, messages: Sequence[ChatMessage]) -> tuple[list[int], int]:
        """The prompt's token ids (tokenized once, here, as SGLang would) and the context size."""
        manager = self._engine.tokenizer_manager
        input_ids = manager.tokenizer([self.chat_prompt(messages)])["input_ids"][0]
        return list(input_ids), int(manager.context_len)

    async def _produce(
        self,
        input_ids: list[int],
        sampling_params: dict[str, Any],
        rid: str,
        emit: Callable[[ReplyEvent], Any],
    ) -> None:
        """Runs on the engine loop: generate and emit events until the reply ends."""
        from sglang.srt.parser.reasoning_parser import ReasoningParser

        parser = ReasoningParser(
            REASONING_PARSER.value, stream_reasoning=True, force_reasoning=True
        )
        text = ""
        try:
            stream = await self._engine.async_generate(
                input_ids=input_ids, sampling_params=sampling_params, stream=True, rid=rid
            )
            async for chunk in stream:
                now = time.perf_counter()
                meta = chunk.get("meta_info", {})
                tokens = int(meta.get("completion_tokens", 0))
                delta, text = chunk.get("text", "")[len(text) :], chunk.get("text", "")
                parts = [parser.parse_stream_chunk(delta)] if delta else []
                finish = meta.get("finish_reason")
                if finish is not None:
                    parts.append(parser.parse_stream_end())
                for reasoning, answer in parts:
                    if reasoning or answer:
                        emit(TextChunk(answer or "", reasoning or "", tokens, now))
                if finish is not None:
                    kind = finish.get("type", "stop") if isinstance(finish, dict) else str(finish)
                    emit(ReplyDone(kind, _jsonable(meta), now))
                    return
            emit(
                ReplyError(
                    "the engine ended the stream without a finish reason", time.perf_counter()
                )
            )
        except Exception as exc:
            crashed = " (SGLang's scheduler died)" if self._crashed.is_set() else ""
            emit(
                ReplyError(
                    f"{type(exc).__name__}: {exc}{crashed}; see {self.log_file}",
                    time.perf_counter(),
                )
            )

    def _prepare_environment(self) -> None:
        """Logging to a file in the data dir, and the plan for the scheduler's patches."""
        config_path = self.log_file.with_suffix(".logging.json")
        try:
            private_dir(self.log_file.parent)
            private_file(self.log_file)
            private_file(config_path)
            config_path.write_text(json.dumps(logging_config(self.log_file)))
        except OSError as exc:
            folder = self.log_file.parent
            raise BackendError(f"cannot write SGLang's log in {folder}: {exc}") from exc
        os.environ["SGLANG_LOGGING_CONFIG_PATH"] = str(config_path)
        plan = PatchPlan(
            fp8_head=self.config.levers.fp8_head,
            dspark=self.config.levers.dspark,
            log_file=str(self.log_file),
        )
        os.environ[PLAN_ENV] = plan.to_env()

    def _install_sigquit_handler(self) -> None:
        """SGLang's children SIGQUIT the parent when they die: record it, don't die."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGQUIT, lambda signum, frame: self._crashed.set())

    def _crash_message(self) -> str:
        """What killed the scheduler, from the last exception in this boot's log."""
        try:
            with open(self.log_file, encoding="utf-8", errors="replace") as log:
                log.seek(max(self._log_start, log.seek(0, os.SEEK_END) - 20000))
                cause = last_error(log.read())
        except OSError:
            cause = None
        died = f"SGLang's scheduler died ({cause})" if cause else "SGLang's scheduler died"
        return f"{died}: restart ling-chat (see {self.log_file})"

    async def _unless_crashed(self, work: Awaitable[T]) -> T:
        """Await `work` from the engine thread; a dead scheduler's requests never end.

        Raises:
            EngineCrashed: SGLang's scheduler died first.
        """
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=CRASH_POLL_S)
                if not task.done() and self._crashed.is_set():
                    raise EngineCrashed(self._crash_message())
            return task.result()
        finally:
            task.cancel()  # a no-op once done; else the request stops with its caller

    def _refusal(self, exc: BaseException, log_text: str) -> ProofReport | None:
        """A `patches.refusal` raised in the scheduler, as a failed proof report."""
        if match := REFUSAL.search(f"{exc}\n{log_text}"):
            return refusal_report(self.config.profile, match.group(1), match.group(2).strip())
        return None


ERROR_LINE = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")


def last_error(log: str) -> str | None:
    """The last exception line of a log (`RuntimeError: CUDA out of memory...`), if any.

    SGLang's own error only says "Initialization failed. Please see the error messages
    above."; the scheduler's traceback in the log says what went wrong.
    """
    for line in reversed(log.splitlines()):
        if match := ERROR_LINE.match(line.strip()):
            return f"{match.group(1)}: {match.group(2)}"[:300]
    return None


def close_ipc(*owners: object) -> None:
    """Close the zmq sockets these objects hold and end their contexts, dropping unsent messages.

    SGLang 0.5.23's `Engine.shutdown` closes only its RPC socket (and ling-chat stops SGLang's
    processes itself); the tokenizer manager's sockets to the scheduler and from the
    detokenizer stay open. pyzmq ends a context when it is garbage-collected, and with the
    default linger that waits until every queued message reaches a process that is gone:
    `ling-chat bench` hung there after its table. `destroy(linger=0)` closes every socket of
    the context and returns at once.
    """
    zmq = sys.modules.get("zmq")
    if zmq is None:  # nothing imported pyzmq: there are no sockets
        return
    contexts = {
        id(value.context): value.context
        for owner in owners
        for value in vars(owner).values()
        if isinstance(value, zmq.Socket)
    }
    for context in contexts.values():
        context.destroy(linger=0)


def in_daemon_thread(fn: Callable[[], T]) -> asyncio.Future[T]:
    """Run `fn` on a daemon thread: quitting meanwhile does not wait for it (a download)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the caller went away
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(cast(T, result))

    def work() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = fn()
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, daemon=True).start()
    return future


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with the real stderr, if not yet running.

    Every spawned process needs the tracker, and SGLang spawns its scheduler. The tracker
    hands `sys.stderr.fileno()` to its own child, but inside a Textual app `sys.stderr`
    is Textual's print capture, whose fileno is -1: the spawn would fail with "bad
    value(s) in fds_to_keep". Called on the UI's thread, so nothing prints meanwhile.
    """
    from multiprocessing import resource_tracker

    with contextlib.redirect_stderr(sys.__stderr__ or sys.stderr):
        resource_tracker.ensure_running()


def _sglang_version() -> str:
    import sglang

    return str(sglang.__version__)


def _jsonable(meta: dict[str, Any]) -> dict[str, Any]:
    """meta_info without its live references (output_ids lists, tensors)."""
    return json.loads(json.dumps(meta, default=str))


def _children() -> set[int]:
    """PIDs of this process's direct children."""
    import psutil

    return {child.pid for child in psutil.Process().children()}


def _stop_processes(pids: list[int], timeout_s: float = 5.0) -> None:
    """Terminate each process tree in `pids`, then kill what is left; wait for exit."""
    import psutil

    procs: list[psutil.Process] = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs += [*root.children(recursive=True), root]
        except psutil.NoSuchProcess:
            continue
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for proc in alive:
        proc.kill()
    psutil.wait_procs(alive, timeout=timeout_s)
