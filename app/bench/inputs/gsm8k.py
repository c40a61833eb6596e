"""GSM8K-format data: loading, the 5-shot chain-of-thought prompt, answer extraction.

A line of the JSONL file is `{"question": "...", "answer": "<worked solution> #### 42"}`.
The worked solutions of the shots are shown without GSM8K's `<<48/2=24>>` calculator
notes and end in "The answer is 42.", the phrase `extract_answer` looks for first.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from app.core.errors import ConfigError

THINK_END = "</think>"
STOP = ("Question:",)
"""Stop strings: the model would otherwise go on to invent the next question."""

_CALCULATOR = re.compile(r"<<[^>]*>>")
# A minus sign counts only when it does not join two words, as in "pages 3-4".
_NUMBER = re.compile(r"(?:(?<![\w.])-)?(?:\$-?)?\d(?:[\d,]*\d)?(?:\.\d+)?")
_MARKERS = (
    re.compile(r"####"),
    re.compile(r"\\boxed\{"),
    re.compile(r"answer is", re.IGNORECASE),
)


@dataclass(frozen=True, slots=True)
class GsmItem:
    """One question with its worked solution and final answer."""

    question: str
    solution: str
    """The reasoning steps, calculator notes removed, without the final answer line."""
    answer: str
    """The final answer as a plain number string, e.g. `1000` or `-3.5`."""


def load_gsm8k(path: Path) -> list[GsmItem]:
    """Read a GSM8K-format JSONL file; blank lines are skipped.

    Raises:
        ConfigError: the file is missing or a line is not a GSM8K item.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the dataset ({exc.strerror})") from exc
    items = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            items.append(_parse_item(line, f"{path}:{number}"))
    return items


def _parse_item(line: str, where: str) -> GsmItem:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not a {{question, answer}} JSON object") from exc
    return item_from_row(data, where)


def item_from_row(data: Any, where: str) -> GsmItem:
    """A GSM8K item from a `{question, answer}` row (a JSONL line or a parquet row).

    Raises:
        ConfigError: the row is not a GSM8K item.
    """
    try:
        question, full = str(data["question"]), str(data["answer"])
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{where}: not a {{question, answer}} JSON object") from exc
    solution, sep, final = full.rpartition("####")
    answer = normalize_number(final) if sep else None
    if answer is None:
        raise ConfigError(f"{where}: the answer does not end in '#### <number>'")
    steps = _CALCULATOR.sub("", solution).split("\n")
    return GsmItem(question.strip(), " ".join(s.strip() for s in steps if s.strip()), answer)


def few_shot_prompt(shots: list[GsmItem], question: str) -> str:
    """The chain-of-thought prompt: each shot solved, then the open question."""
    solved = [
        f"Question: {shot.question}\nAnswer: {shot.solution} The answer is {shot.answer}."
        for shot in shots
    ]
    return "\n\n".join([*solved, f"Question: {question}\nAnswer:"])


def normalize_number(text: str) -> str | None:
    """The first number in `text` without `$` and thousands commas, or None."""
    match = _NUMBER.search(text)
    if match is None:
        return None
    cleaned = match.group().replace("$", "").replace(",", "")
    return "-" + cleaned.replace("-", "") if "-" in cleaned else cleaned


def extract_answer(reply: str) -> str | None:
    """The model's final number: after the last `####`, `\\boxed{` or "answer is", else the
    last number in the reply. A reasoning block (up to the last `</think>`) is not read."""
    reply = reply.rpartition(THINK_END)[2]
    for marker in _MARKERS:
        found = list(marker.finditer(reply))
        if found and (number := normalize_number(reply[found[-1].end() :])) is not None:
            return number
    numbers = _NUMBER.findall(reply)
    return normalize_number(numbers[-1]) if numbers else None


def answers_match(extracted: str | None, expected: str) -> bool:
    """Numeric equality, so `3.50` matches `3.5`."""
    if extracted is None:
        return False
    try:
        return Decimal(extracted) == Decimal(expected)
    except InvalidOperation:
        return False
