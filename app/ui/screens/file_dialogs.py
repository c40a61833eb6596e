"""Dialogs that name a file: the one to attach (a folder tree, or a typed path) and where to
export the open chat."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, DirectoryTree, Input, Label

from app.render.formats import FORMATS
from app.textsafe import visible
from app.ui.screens.dialogs import Dialog


def typed_path(value: str, folder: Path) -> Path | None:
    """A typed path, `~` expanded, relative ones under `folder`; None when blank."""
    value = value.strip()
    return folder / Path(value).expanduser() if value else None


class AttachDialog(Dialog[Path]):
    """Picks a file to attach: from the folder tree, or typed (Enter); the result is its path.

    With files attached already, it names them and offers to remove them (`on_detach`)."""

    def __init__(
        self, folder: Path, attached: Sequence[str], on_detach: Callable[[], None]
    ) -> None:
        super().__init__(classes="dialog")
        self._folder = folder
        self._attached = attached
        self._on_detach = on_detach

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box attach"):
            yield Label("Attach a file's text to the prompt", classes="heading")
            yield Input(placeholder="a path (Enter attaches it)", id="attach-path")
            yield DirectoryTree(self._folder, id="attach-tree")
            with Horizontal(classes="dialog-buttons"):
                yield Label("Enter picks · Tab moves · Esc cancels", classes="dialog-hint")
                if self._attached:
                    yield Button("Remove attached", variant="warning", id="detach")
            if self._attached:
                names = visible(", ".join(self._attached))
                yield Label(f"Attached: {names}", id="attached-now", markup=False)

    def on_mount(self) -> None:
        self.query_one("#attach-path", Input).focus()

    @on(Input.Submitted, "#attach-path")
    def _path_typed(self, event: Input.Submitted) -> None:
        path = typed_path(event.value, self._folder)
        if path is not None:
            self.dismiss(path)

    @on(DirectoryTree.FileSelected)
    def _file_picked(self, event: DirectoryTree.FileSelected) -> None:
        self.dismiss(event.path)

    @on(Button.Pressed, "#detach")
    def _remove_attached(self) -> None:
        self._on_detach()
        self.dismiss(None)


def export_format(path: Path) -> str | None:
    """The export format `path`'s suffix names, or None."""
    suffix = path.suffix.lstrip(".").lower()
    return suffix if suffix in FORMATS else None


class ExportDialog(Dialog[Path]):
    """Asks where to export the open chat; the format follows the file's suffix."""

    def __init__(self, suggested: Path) -> None:
        super().__init__(classes="dialog")
        self._suggested = suggested

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog-box"):
            yield Label("Export this chat", classes="heading")
            yield Input(str(self._suggested), id="export-path")
            suffixes = " ".join(f".{name}" for name in FORMATS)
            yield Label("", id="export-error", classes="error")
            yield Label(
                f"The suffix picks the format: {suffixes}\nEnter writes · Esc cancels",
                classes="dialog-hint",
            )

    @on(Input.Submitted, "#export-path")
    def _export_path_typed(self, event: Input.Submitted) -> None:
        path = typed_path(event.value, Path.cwd())
        if path is None:
            return
        if export_format(path) is None:
            known = ", ".join(f".{name}" for name in FORMATS)
            error = self.query_one("#export-error", Label)
            error.update(f"{path.name}: name a file ending in {known}")
            error.display = True
            return
        self.dismiss(path)
