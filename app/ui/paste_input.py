"""Bracketed pastes keep their ESC characters in a real terminal.

Textual's input parser (8.x) reads an ESC inside a bracketed paste as the start of a key
sequence, so a pasted ESC and up to 32 characters after it arrive as typed keys, out of
order. `PasteGuard` rewrites the raw input before the parser sees it: inside a paste, every
ESC but the one of the paste's end marker becomes `ESC_STAND_IN`, a private-use character
that the prompt (`widgets.composer`) turns back into ESC; other fields show it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual._xterm_parser import XTermParser
from textual.drivers import linux_driver
from textual.message import Message

ESC = "\x1b"
PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
ESC_STAND_IN = "\U000f001b"
"""Stands for a pasted ESC between the terminal and the prompt: never typed, never drawn raw."""


class PasteGuard:
    """Rewrites terminal input chunk by chunk; a paste's markers may arrive split."""

    def __init__(self) -> None:
        self._pasting = False
        self._recent = ""
        """The last characters passed on outside a paste: a start marker may begin in them."""
        self._held = ""
        """The start of a chunk's tail that may be the first bytes of the end marker."""

    def __call__(self, data: str) -> str:
        data, self._held = self._held + data, ""
        out: list[str] = []
        while data:
            if not self._pasting:
                seen = self._recent + data
                start = seen.find(PASTE_START)
                if start < 0:
                    out.append(data)
                    self._recent = seen[1 - len(PASTE_START) :]
                    break
                cut = start + len(PASTE_START) - len(self._recent)
                out.append(data[:cut])
                data = data[cut:]
                self._pasting, self._recent = True, ""
                continue
            end = data.find(PASTE_END)
            if end < 0:
                held = _end_marker_start(data)
                out.append(data[: len(data) - held].replace(ESC, ESC_STAND_IN))
                self._held = data[len(data) - held :]
                break
            out.append(data[:end].replace(ESC, ESC_STAND_IN) + PASTE_END)
            data = data[end + len(PASTE_END) :]
            self._pasting = False
        return "".join(out)


def _end_marker_start(data: str) -> int:
    """The length of `data`'s longest tail that the paste's end marker starts with."""
    for size in range(min(len(PASTE_END) - 1, len(data)), 0, -1):
        if PASTE_END.startswith(data[-size:]):
            return size
    return 0


class PasteGuardedParser(XTermParser):
    """Textual's parser, fed through a `PasteGuard`."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__(debug)
        self._guard = PasteGuard()

    def feed(self, data: str) -> Iterable[Message]:
        return super().feed(self._guard(data) if data else data)


def guard_pastes() -> None:
    """Make the terminal driver parse its input with `PasteGuardedParser`."""
    linux_driver.XTermParser = PasteGuardedParser  # type: ignore[misc]
