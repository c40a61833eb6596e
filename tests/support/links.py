"""A file of someone else's, and a symbolic link to it where ling-chat is asked to write."""

from __future__ import annotations

from pathlib import Path


def planted_link(folder: Path, name: str) -> tuple[Path, Path]:
    """(the link `folder/name`, the file it points to: `theirs/precious`, mode 0644)."""
    (folder / "theirs").mkdir()
    victim = folder / "theirs" / "precious"
    victim.write_text("keep")
    victim.chmod(0o644)
    link = folder / name
    link.symlink_to(victim)
    return link, victim
