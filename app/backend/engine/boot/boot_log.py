"""SGLang's start-up log, read as it grows: whole lines only, named as steps people know.

The engine sends the named step as its load stage's detail: the UI never reads SGLang's log.
"""

from __future__ import annotations

import re
from typing import Final

from app.backend.engine.boot.load_progress import STAGES

LOAD_STAGE: Final = "Loading weights, compiling Humming kernels, capturing CUDA graphs"
"""The engine's start-up stage whose progress details are lines of SGLang's log."""
DETAIL_CHARS: Final = 60
"""The most characters of a log message shown as a step (cut at a word)."""

_LOG_PREFIX: Final = re.compile(
    r"^(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]*\]"  # [2026-11-29 17:40:21 TP0]
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)?(?: \d+)?(?: [\w.]+:)?)\s+"  # date pid logger:
)
_STEPS: Final = (
    (r"scheduler_e2e|tokenizer_e2e|server is fired up", "Engine ready"),
    (r"Capture .*CUDA graph|Capturing batches|cuda graph", "Capturing CUDA graphs"),
    (r"[Hh]umming", "Preparing the Humming MoE kernels"),
    (r"Building JIT module|JIT compil", "Compiling kernels (a machine's first start: minutes)"),
    (r"Memory pool|KV Cache|kv_cache|mamba_cache|ssm_state", "Allocating the KV cache"),
    (r"Load weight|Loading safetensors|Loading weights|checkpoint shards", "Loading the weights"),
    (r"Init parallel|Init torch distributed", "Starting the GPU worker"),
    (r"template_manager|chat template", "Loading the chat template"),
    (r"model_config", "Reading the model's config"),
)
_STEP_PATTERNS: Final = tuple((re.compile(pattern), name) for pattern, name in _STEPS)


def describe(line: str) -> str | None:
    """The step a log line shows, for people; None for a line that is not a whole log line.

    Known lines get a step name; another line of SGLang's logger shows its message, cut
    at a word; anything else (a wrapped line's tail, a warning's continuation) is None.
    The weight load's progress (app/backend/engine/boot/load_progress.py) shows as it is.
    """
    line = line.strip().rsplit("\r", 1)[-1].strip()  # a progress bar redraws with \r
    if line.startswith(tuple(STAGES.values())):
        return line
    for pattern, name in _STEP_PATTERNS:
        if pattern.search(line):
            return name
    prefix = _LOG_PREFIX.match(line)
    if prefix is None or not line[prefix.end() :]:
        return None
    return shorten(line[prefix.end() :])


def shorten(text: str, limit: int = DETAIL_CHARS) -> str:
    """`text` cut at the last word that fits in `limit` characters, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


class BootLog:
    """The log as it grows; a line counts once it is whole (ends with a newline)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        """Whole lines so far, without their newline."""
        self._partial = ""
        self.latest: str | None = None
        """The step (`describe`) of the last whole line that names one."""

    def feed(self, text: str) -> None:
        """Take what was appended to the log since the last call."""
        *whole, self._partial = (self._partial + text).split("\n")
        self.lines += whole
        for line in reversed(whole):
            if (step := describe(line)) is not None:
                self.latest = step
                break

    @property
    def text(self) -> str:
        """Everything read so far, the unfinished line included."""
        return "\n".join([*self.lines, self._partial])
