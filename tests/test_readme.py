"""The README a user reads: short, starting with the two commands CI and users run as
written; the docs it links to exist; docs/proof.md names every line the proof prints."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.backend.proof import LINES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
COMMANDS = (
    "python3 -m venv .venv && .venv/bin/pip install '.[engine]' && .venv/bin/ling-chat",
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/python -m pytest",
)
MAX_LINES = 120
MAX_WIDTH = 100
"""Characters a line of prose or code may show (a link's target does not show)."""
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _fenced_blocks(text: str) -> list[list[str]]:
    blocks: list[list[str]] = []
    inside = False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            if inside:
                blocks.append([])
        elif inside:
            blocks[-1].append(line)
    return blocks


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    words = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return words.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {_anchor(line.lstrip("#")) for line in lines if line.startswith("#")}


def test_the_readme_is_at_most_120_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines, at most {MAX_LINES}"


def test_the_readme_starts_with_the_two_commands_exactly() -> None:
    text = README.read_text(encoding="utf-8")
    first = _fenced_blocks(text)[0]
    assert tuple(first) == COMMANDS
    assert text.index("```") < text.index("\n## "), "the commands come before any section"


def test_the_readme_s_prose_and_code_lines_fit_100_characters() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    wide = [
        f"{number}: {line[:60]}..."
        for number, line in enumerate(lines, 1)
        if not line.startswith("|") and len(LINK.sub("[]", line)) > MAX_WIDTH
    ]
    assert not wide, "lines over 100 characters:\n" + "\n".join(wide)


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_points_to_an_existing_file_and_heading(doc: Path) -> None:
    broken = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def test_the_proof_doc_names_every_line_the_proof_prints() -> None:
    text = (ROOT / "docs" / "proof.md").read_text(encoding="utf-8")
    missing = [line.title for line in LINES.values() if f"\n| {line.title}" not in text]
    assert not missing, f"docs/proof.md lacks the lines {missing}"
