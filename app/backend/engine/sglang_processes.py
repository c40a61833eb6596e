"""SGLang's processes for one engine: born at its boot, watched for a crash, stopped with it.

SGLang's Engine spawns its scheduler and detokenizer as children of this process. Boots
take a process-wide lock, so the children born during one are that engine's alone, and the
environment its children inherit (the patch plan, the logging config) is that engine's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from app.plumbing.abrupt_end import on_abrupt_end
from app.plumbing.signals import DISPATCHER

if TYPE_CHECKING:
    import psutil

T = TypeVar("T")
STOP_WAIT_S = 5.0
"""How long a stop waits for terminated processes before killing them."""
ABRUPT_WAIT_S = 0.2
"""The same when the process ends at once (`end_now`)."""
_BOOT_LOCK = threading.Lock()


class EngineProcesses:
    """The processes one engine's boot spawned (each with its own children)."""

    def __init__(self) -> None:
        self._before: set[int] | None = None
        """This process's children when the boot began (None: no boot since the last stop)."""
        self._spawned: list[psutil.Process] | None = None
        """The children the boot spawned, once it has ended."""
        self._quit = threading.Event()
        self.died = threading.Event()
        """Set once a SIGQUIT came and one of these processes was found gone."""
        self._unsubscribe: Callable[[], None] | None = None
        self._forget_abrupt: Callable[[], None] | None = None
        self._stopping: list[psutil.Process] = []
        """The processes `stop` is stopping now."""

    def boot(self, make: Callable[[], T], environment: Mapping[str, str]) -> T:
        """`make()` with `environment` set, recording the children it spawns (stopped with
        this process even when it ends at once)."""
        with _BOOT_LOCK:
            os.environ.update(environment)  # what the spawned children inherit
            before = self._before = {child.pid for child in _children()}
            if self._forget_abrupt is None:
                self._forget_abrupt = on_abrupt_end(self._stop_at_once)
            try:
                return make()
            finally:
                self._spawned = [child for child in _children() if child.pid not in before]

    def watch(self) -> None:
        """Record SIGQUITs from now on, not die of them (call before the boot).

        SGLang's children SIGQUIT this process when one of them dies (see `crashed`).
        """
        if self._unsubscribe is None:
            self._unsubscribe = DISPATCHER.subscribe(signal.SIGQUIT, self._quit.set)

    def crashed(self) -> bool:
        """Whether one of this engine's processes died (a SIGQUIT came, and it is gone).

        A SIGQUIT does not say which child sent it: another engine's dying child, or one
        stopped with its engine, sends it too.
        """
        if self._quit.is_set() and any(_gone(child) for child in self._spawned or ()):
            self.died.set()
        return self.died.is_set()

    def stop(self) -> None:
        """Stop every process the boot spawned, with its children; also mid-boot."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._before is None:
            return
        roots = self._spawned
        if roots is None:  # the boot is still running: what it spawned so far
            roots = [child for child in _children() if child.pid not in self._before]
        self._before = self._spawned = None
        self._stopping = roots
        _stop_trees(roots)
        self._stopping = []
        if self._forget_abrupt is not None:
            self._forget_abrupt()
            self._forget_abrupt = None

    def _stop_at_once(self) -> None:
        """Kill what `stop` would stop, or is stopping, without waiting (`end_now`)."""
        roots = self._stopping or self._spawned
        if roots is None and self._before is not None:
            roots = [child for child in _children() if child.pid not in self._before]
        _stop_trees(list(roots or ()), ABRUPT_WAIT_S)


def _children() -> list[psutil.Process]:
    """This process's direct children."""
    import psutil

    return list(psutil.Process().children())


def _gone(process: psutil.Process) -> bool:
    import psutil

    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _stop_trees(roots: list[psutil.Process], timeout_s: float = STOP_WAIT_S) -> None:
    """Terminate each process in `roots` with its descendants, then kill what is left."""
    import psutil

    procs: list[psutil.Process] = []
    for root in roots:
        with contextlib.suppress(psutil.NoSuchProcess):
            procs += [*root.children(recursive=True), root]
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout_s)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=timeout_s)


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


def start_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with the real stderr, if not yet running.

    Every spawned process needs the tracker, and SGLang spawns its scheduler. The tracker
    hands `sys.stderr.fileno()` to its own child, but inside a Textual app `sys.stderr`
    is Textual's print capture, whose fileno is -1: the spawn would fail with "bad
    value(s) in fds_to_keep". Called on the UI's thread, so nothing prints meanwhile; before
    a boot, so the tracker is not taken for SGLang's.
    """
    from multiprocessing import resource_tracker

    with contextlib.redirect_stderr(sys.__stderr__ or sys.stderr):
        resource_tracker.ensure_running()
