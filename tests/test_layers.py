"""The app's parts import only downward, no modules import each other in a circle, and the
UI sees the model side only through the backend's protocol.

Read from the source with `ast`, so an import inside a function or under TYPE_CHECKING counts.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
TESTS = Path(__file__).resolve().parent

LAYERS = (
    ("app.cli",),
    ("app.commands",),
    ("app.launch",),
    ("app.ui", "app.bench"),
    ("app.prefs",),
    ("app.render", "app.settings"),
    ("app.storage", "app.backend.firststart", "app.backend.remote"),
    ("app.backend.resident",),
    ("app.backend.engine",),
    ("app.backend.proof", "app.backend.replay", "app.backend.checkpoint"),
    ("app.backend.trace",),
    (
        "app.backend.download",
        "app.backend.draft",
        "app.backend.thinking",
        "app.backend.warmup",
        "app.backend.wire",
    ),
    ("app.backend.protocol", "app.backend.sglang_meta", "app.plumbing"),
    ("app.api_key", "app.files", "app.telemetry", "app.textsafe"),
    ("app.levers",),
    ("app.core",),
)
"""Top to bottom. A part imports only from itself and from the layers below its own; the
parts of one layer do not import each other."""


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def imported_names(path: Path) -> frozenset[str]:
    """Every module (or module.name) `path` imports (absolute imports: `app` uses no others)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(found)


def imports(path: Path) -> set[str]:
    """The `app` modules that `path` imports."""
    return imported_names(path) & MODULES


MODULES = {module_name(path) for path in APP.rglob("*.py")}
GRAPH = {module_name(path): imports(path) for path in sorted(APP.rglob("*.py"))}


def part_of(module: str) -> tuple[int, str] | None:
    for level, parts in enumerate(LAYERS):
        for part in parts:
            if module == part or module.startswith(part + "."):
                return level, part
    return None


def test_every_module_belongs_to_a_layer():
    grouping = ("app", "app.__main__", "app.backend")
    assert [m for m in GRAPH if m not in grouping and part_of(m) is None] == []


def test_imports_run_only_downward():
    wrong = []
    for module, targets in GRAPH.items():
        if (here := part_of(module)) is None:
            continue
        for target in sorted(targets):
            there = part_of(target)
            if there is not None and there[1] != here[1] and there[0] <= here[0]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


UI_SEES_OF_THE_BACKEND = {"app.backend.protocol"}
"""The one backend module the UI may import: the narrow interface and its records."""


def test_the_ui_imports_only_the_backends_protocol():
    wrong = [
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if module == "app.ui" or module.startswith("app.ui.")
        for target in sorted(targets)
        if (target == "app.backend" or target.startswith("app.backend."))
        and target not in UI_SEES_OF_THE_BACKEND
    ]
    assert wrong == []


def test_no_modules_import_each_other_in_a_circle():
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        if module in path:
            pytest.fail("import circle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for target in sorted(GRAPH.get(module, ())):
            if target != module and not module.startswith(target + "."):
                visit(target, (*path, module))
        done.add(module)

    for module in GRAPH:
        visit(module, ())


def test_neither_the_app_nor_its_tests_import_the_lab():
    """`lab/` (research code, GPU-machine scripts) is not in the wheel: the product runs
    without it."""
    wrong = [
        f"{path.relative_to(APP.parent)} -> {name}"
        for root in (APP, TESTS)
        for path in sorted(root.rglob("*.py"))
        if "lab" in path.read_text(encoding="utf-8")  # no import of it without the word
        for name in sorted(imported_names(path))
        if name == "lab" or name.startswith("lab.")
    ]
    assert wrong == []
