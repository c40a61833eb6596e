"""Shared pytest set-up: the `gpu` marker runs only with --run-gpu; end-to-end tests (the
`end_to_end` fixture) make the slow lane and leave no process; isolated dirs; an engine that
reads as not installed; and a run that fails when any process the session started is left."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import fast_lane, leftovers
from tests.support.timeouts import scaled

ENGINE_DOUBLE = Path(__file__).resolve().parent / "fixtures" / "engine_double"
"""The engine double: SGLang, torch and their kin as the CPU tests' doubles."""

LEFTOVER_WAIT_S = 5.0
"""How long a check for processes left waits for those that are being stopped."""
END_TO_END = frozenset({"end_to_end", "snap_compare"})
"""Fixtures that make a test end to end (a process, a pseudo-terminal, or the app under
Pilot, as `snap_compare` runs it): it runs in the slow lane."""
SESSION_TOKEN = pytest.StashKey[str]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[SESSION_TOKEN] = leftovers.mark_session()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run when a process the session started still runs (and stop it)."""
    found = leftovers.left_behind(session.config.stash[SESSION_TOKEN], scaled(LEFTOVER_WAIT_S))
    if not found:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line("")
        reporter.write_sep(
            "=", f"FAILED: {len(found)} processes left behind (now stopped)", red=True
        )
        for process in found:
            reporter.write_line(leftovers.describe(process), red=True)
    leftovers.stop(found)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-gpu", action="store_true", help="run tests marked gpu (needs CUDA and SGLang)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="needs a GPU: run with --run-gpu on the GPU machine")
    for item in items:
        if END_TO_END & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if "gpu" in item.keywords and not config.getoption("--run-gpu"):
            item.add_marker(skip)


@pytest.fixture
def end_to_end(request: pytest.FixtureRequest) -> Iterator[None]:
    """The test starts processes or runs the app under Pilot (the slow lane); a process it
    started that still runs at its end fails it (and is stopped)."""
    token = request.config.stash[SESSION_TOKEN]
    before = {process.pid for process in leftovers.running(token)}
    yield
    found = leftovers.left_behind(token, scaled(LEFTOVER_WAIT_S), before)
    if found:
        named = "\n".join(leftovers.describe(process) for process in found)
        leftovers.stop(found)
        pytest.fail(f"processes left behind (now stopped):\n{named}", pytrace=False)


@pytest.fixture(autouse=True)
def fast_lane_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CPU test outside the slow lane that would start a Python process or run the app
    under Pilot fails, naming the `end_to_end` fixture (GPU tests are end to end anyway)."""
    if not any(request.node.get_closest_marker(name) for name in ("slow", "gpu")):
        fast_lane.guard(request.node.nodeid, monkeypatch)


@pytest.fixture(autouse=True)
def isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """Keep every test away from the real config file, data dir and LING_CHAT_* variables
    (the GPU tests' own LING_CHAT_TEST_* knobs stay)."""
    import os

    for name in list(os.environ):
        if name.startswith("LING_CHAT_") and not name.startswith("LING_CHAT_TEST_"):
            monkeypatch.delenv(name)
    root = tmp_path_factory.mktemp("home")
    (root / "config.toml").touch()  # a LING_CHAT_CONFIG that names no file is an error
    monkeypatch.setenv("LING_CHAT_CONFIG", str(root / "config.toml"))
    monkeypatch.setenv("LING_CHAT_DATA_DIR", str(root / "data"))
    monkeypatch.setenv("HF_HUB_CACHE", str(root / "hf-cache"))
    return root


@pytest.fixture(autouse=True, scope="session")
def no_hub_network():
    """huggingface_hub's requests go to a transport that refuses them: no test reaches the Hub."""
    from tests.fixtures.hub_double import refuse_network

    refuse_network()


@pytest.fixture(autouse=True)
def isolated_kernel_caches(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
):
    """CPU tests keep away from the real kernel caches, which a start checks and heals (the
    builders' own defaults are under HOME); the GPU tests use them (their kernels are built
    once)."""
    if request.node.get_closest_marker("gpu"):
        return
    root = tmp_path_factory.mktemp("kernels")
    for name in ("SGLANG_CACHE_DIR", "HUMMING_CACHE_DIR", "TRITON_CACHE_DIR"):
        monkeypatch.setenv(name, str(root / name.lower()))
    monkeypatch.delenv("FLASHINFER_WORKSPACE_BASE", raising=False)
    monkeypatch.setenv("HOME", str(root / "home"))


@pytest.fixture
def permissive_umask() -> Iterator[None]:
    """A umask that lets others read what is created: files ling-chat keeps private must
    say so themselves (use it with `pytest.mark.usefixtures`)."""
    import os

    old = os.umask(0o022)
    yield
    os.umask(old)


@pytest.fixture
def engine_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `engine` extra reads as missing in this process, installed or not: importing any
    of its packages fails and `find_spec` finds none (modules already loaded are set aside)."""
    from app.backend.engine.setup import ENGINE_PACKAGES

    for name in ENGINE_PACKAGES:
        for loaded in [m for m in sys.modules if m.startswith(f"{name}.")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A local checkpoint folder holding Ling-3.0-flash's config alone."""
    import json

    from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LING_3_FLASH_CONFIG))
    return tmp_path / "model"


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """For the CLI run in this process: probe results injected for the real ones (a healthy
    Spark; change `state["probes"]`), SGLang read as installed (the engine double), and what
    ran after the preflight recorded in `state["loaded"]` instead of run."""
    from app import launch
    from app.backend.firststart import gpu_probe
    from app.backend.firststart import probes as preflight_probes
    from tests.support.preflight import HEALTHY_SPARK

    state: dict[str, Any] = {"probes": HEALTHY_SPARK, "loaded": []}
    monkeypatch.syspath_prepend(str(ENGINE_DOUBLE))  # SGLang "installed"
    monkeypatch.setattr(
        preflight_probes,
        "probe",
        lambda download_dir, packages=(), checkpoint=None: state["probes"],
    )
    monkeypatch.setattr(gpu_probe, "probe_gpu", lambda: gpu_probe.GpuProbe(True, name="GB10"))

    async def prepared(spec: Any, out: Any = None) -> None:
        state["loaded"].append(("prepare", spec.config.profile))

    def loaded(*args: Any, **kwargs: Any) -> Any:
        state["loaded"].append(("engine",))
        raise SystemExit(0)

    monkeypatch.setattr(launch, "prepare_printing", prepared)
    monkeypatch.setattr(launch, "PreparedBackend", loaded)
    monkeypatch.setattr("app.backend.remote.server.serve", loaded)
    return state


@pytest.fixture
def keys_from_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard input reads as a terminal, as when a user starts the chat in one (the chat
    refuses to start without one, and pytest's own stdin is none)."""
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
