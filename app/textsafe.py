"""Text from a model, a user or a file, made harmless to show on a terminal.

A terminal obeys control characters in the text it is given: ESC starts sequences that
clear the screen, set the window title (OSC 0) or the clipboard (OSC 52), and C1 codes
(U+0080-U+009F) do the same in one character. `visible` replaces each such character
with a printable stand-in, one character at a time, so no sequence survives and streamed
text can be made safe chunk by chunk:

- C0 controls except newline and tab, and DEL, become their Unicode control pictures
  (ESC `␛`, BEL `␇`, CR `␍`, NUL `␀`, DEL `␡`);
- a C1 control becomes `␛` and the 7-bit character it stands for (CSI U+009B: `␛[`);
- an invisible format character becomes its code point in angle brackets (`⟨U+202E⟩`):
  the BiDi controls (U+202A-U+202E, U+2066-U+2069, U+200E/F, U+061C), which reorder the
  text around them and shift a column's border, the zero-width space, word joiner and BOM,
  the line and paragraph separators, the invisible tag characters (U+E0000-U+E007F), which
  can hide text, and every other format character (Unicode category Cf) except the
  zero-width joiner and non-joiner, which emoji and many scripts need; the Hangul fillers,
  blank letters that can pass for spaces, too.

Stored text and file exports keep the exact characters; what the CLI prints is rewritten
whether it goes to a terminal, a pipe or a pager (`| head` and `| less -R` end on a terminal
too), unless the user asks for the exact text with `--raw`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import IO, Final

_ESC_PICTURE: Final = "\u241b"
_INVISIBLE: Final = (
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x180E, 0x180E),
    (0x200B, 0x200B),
    (0x200E, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0x3164, 0x3164),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
"""Inclusive ranges of the invisible characters shown as their code point."""
_TABLE: Final[dict[int, str]] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\n\t"},
    0x7F: "\u2421",
    **{code: _ESC_PICTURE + chr(code - 0x40) for code in range(0x80, 0xA0)},
    **{
        code: f"\u27e8U+{code:04X}\u27e9"
        for low, high in _INVISIBLE
        for code in range(low, high + 1)
    },
}


def visible(text: str) -> str:
    """`text` with every control and invisible format character but newline and tab shown as
    a visible stand-in."""
    return text.translate(_TABLE)


def one_line(text: str) -> str:
    """`visible(text)` on one line, for a name in a list: newline as `␤`, tab as `␉`, so a
    title cannot draw rows of its own (a damaged row's bytes as `str()` shows them)."""
    return visible(str(text)).replace("\n", "\u2424").replace("\t", "\u2409")


def is_safe(text: str) -> bool:
    """True when `text` holds no character `visible` would replace."""
    return not any(ord(char) in _TABLE for char in text)


def escaped(text: str, escape: Callable[[str], str]) -> str:
    """`text` with each character `visible` would replace written as `escape(char)` instead
    (JSON's `\\u202e`: the same data, nothing a terminal acts on)."""
    if is_safe(text):
        return text
    return "".join(escape(char) if ord(char) in _TABLE else char for char in text)


class TerminalText:
    """A text stream that writes through `visible`: what the CLI prints, unless `--raw`."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write `text` made visible, CRLF line ends kept (a CSV's); returns its length."""
        self._stream.write("\r\n".join(visible(part) for part in text.split("\r\n")))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each line made visible."""
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> object:
        return getattr(self._stream, name)


def made_visible(stream: IO[str]) -> IO[str]:
    """`stream` wrapped in a `TerminalText`, typed as the stream it stands in for."""
    return TerminalText(stream)  # type: ignore[return-value]
