"""Shared pytest set-up: the `gpu` marker runs only with --run-gpu, isolated dirs, and an
engine that reads as not installed."""

from __future__ import annotations

import sys

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-gpu", action="store_true", help="run tests marked gpu (needs CUDA and SGLang)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-gpu"):
        return
    skip = pytest.mark.skip(reason="needs a GPU: run with --run-gpu on the GPU machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
def engine_not_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The `engine` extra reads as missing in this process, installed or not: importing any
    of its packages fails and `find_spec` finds none (modules already loaded are set aside)."""
    from app.backend.engine.setup import ENGINE_PACKAGES

    for name in ENGINE_PACKAGES:
        for loaded in [m for m in sys.modules if m.startswith(f"{name}.")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


@pytest.fixture
def keys_from_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Standard input reads as a terminal, as when a user starts the chat in one (the chat
    refuses to start without one, and pytest's own stdin is none)."""
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
