"""Ling's thinking in the raw text of a reply: `<think>` ... `</think>`, then the answer.

Both the in-process engine and a server are asked for raw text while a reply thinks, and
ling-chat splits it here. Not SGLang 0.5.23's `ling3` reasoning parser: at the end of a stream
still inside the thinking (a budget reached, `</think>` taken as the stop), it hands the
whole thinking out again as the answer (`Ling3Detector`, `force_nonempty_content`; a
"client-experience fallback"), so a reply cut in its thinking would show it twice.
"""

from __future__ import annotations

from typing import Final

from app.core.chat import PartialReply

THINK: Final = "<think>"
END_THINK: Final = "</think>"


def continued_text(partial: PartialReply) -> str:
    """What the model wrote of `partial`, as raw text after the generation prompt: its
    thinking, then `</think>` and its answer once the answer began."""
    if partial.thinking_open or not partial.reasoning:
        return partial.reasoning or partial.answer
    return f"{partial.reasoning}{END_THINK}{partial.answer}"


class ThinkingSplit:
    """Splits streamed raw text that starts inside the thinking into (thinking, answer)
    deltas at `</think>`; a leading `<think>` the model writes itself is dropped.

    Text that could be the start of a tag is held back until the next delta tells."""

    def __init__(self) -> None:
        self.closed = False
        """True once `</think>` arrived: the rest is answer."""
        self._held = ""
        self._started = False

    def feed(self, delta: str) -> tuple[str, str]:
        """The (thinking, answer) text of `delta`, as far as it can be told yet."""
        if self.closed:
            return "", delta
        text = self._held + delta
        self._held = ""
        if not self._started:
            if THINK.startswith(text) and text != THINK:
                self._held = text
                return "", ""
            self._started = True
            text = text.removeprefix(THINK)
        before, found, after = text.partition(END_THINK)
        if found:
            self.closed = True
            return before, after
        for cut in range(min(len(END_THINK) - 1, len(text)), 0, -1):
            if END_THINK.startswith(text[-cut:]):
                self._held = text[-cut:]
                return text[:-cut], ""
        return text, ""

    def end(self) -> tuple[str, str]:
        """What is held back, once the stream has ended (a tag it never finished)."""
        held, self._held = self._held, ""
        return ("", held) if self.closed else (held, "")
