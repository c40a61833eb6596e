"""Text from a model, a user or a file, made harmless to show on a terminal.

A terminal obeys control characters in the text it is given: ESC starts sequences that
clear the screen, set the window title (OSC 0) or the clipboard (OSC 52), and C1 codes
(U+0080-U+009F) do the same in one character. `visible` replaces each such character
with a printable stand-in, one character at a time, so no sequence survives and streamed
text can be made safe chunk by chunk:

- C0 controls except newline and tab, and DEL, become their Unicode control pictures
  (ESC `␛`, BEL `␇`, CR `␍`, NUL `␀`, DEL `␡`);
- a C1 control becomes `␛` and the 7-bit character it stands for (CSI U+009B: `␛[`).

Stored text and file exports keep the exact characters; only what reaches a screen is
rewritten.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO, Final

_ESC_PICTURE: Final = "\u241b"
_TABLE: Final[dict[int, str]] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\n\t"},
    0x7F: "\u2421",
    **{code: _ESC_PICTURE + chr(code - 0x40) for code in range(0x80, 0xA0)},
}


def visible(text: str) -> str:
    """`text` with every control character but newline and tab shown as a visible stand-in."""
    return text.translate(_TABLE)


def is_safe(text: str) -> bool:
    """True when `text` holds no character a terminal would act on (newline and tab aside)."""
    return not any(ord(char) in _TABLE for char in text)


class TerminalText:
    """A text stream that writes through `visible`: stdout when it is a terminal."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write `text` made visible; returns the length of `text`."""
        self._stream.write(visible(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each line made visible."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def for_terminal(stream: IO[str]) -> IO[str]:
    """`stream` itself, or a `TerminalText` over it when it is a terminal."""
    try:
        tty = stream.isatty()
    except ValueError:  # a closed stream
        return stream
    return TerminalText(stream) if tty else stream  # type: ignore[return-value]
