"""`app.files`: whole or nothing, never through a symbolic link, nothing replaced unasked."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.core.errors import ExportError, StorageError, TargetExists
from app.files import new_file, write_atomic
from tests.support.links import planted_link

LINK_REFUSED = (
    "it is a symbolic link, and ling-chat never writes through one (name the file itself)"
)


pytestmark = pytest.mark.usefixtures("permissive_umask")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_write_replaces_the_file_when_asked_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    target.write_text("old")
    target.chmod(0o644)
    write_atomic(target, iter(["new ", "text"]), replace=True)
    assert target.read_text() == "new text"
    assert mode(target) == 0o600  # the documented mode, not the old file's
    assert list(tmp_path.iterdir()) == [target]


def test_a_new_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    write_atomic(tmp_path / "new.md", ["text"], replace=False)
    assert mode(tmp_path / "new.md") == 0o600


def test_an_existing_file_is_refused_unless_replacing_was_asked(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    target.write_text("old")
    with pytest.raises(TargetExists) as caught:
        write_atomic(target, ["new"], replace=False)
    assert str(caught.value) == f"{target} exists already"
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_a_file_that_appears_while_writing_is_not_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "out.md"

    def racing() -> Iterator[str]:
        yield "mine"
        target.write_text("theirs")  # another process got there first

    with pytest.raises(TargetExists):
        write_atomic(target, racing(), replace=False)
    assert target.read_text() == "theirs"
    assert list(tmp_path.iterdir()) == [target]


def test_without_hard_links_the_name_is_claimed_before_the_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")  # as FAT answers

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "out.md"
    write_atomic(target, ["text"], replace=False)
    assert target.read_text() == "text" and mode(target) == 0o600
    with pytest.raises(TargetExists):
        write_atomic(target, ["again"], replace=False)
    assert target.read_text() == "text"
    assert list(tmp_path.iterdir()) == [target]


@pytest.mark.parametrize("replace", [True, False])
def test_a_link_at_the_target_is_refused_and_its_target_left_alone(
    tmp_path: Path, replace: bool
) -> None:
    link, victim = planted_link(tmp_path, "out.md")
    with pytest.raises(ExportError) as caught:
        write_atomic(link, ["new"], replace=replace)
    assert str(caught.value) == f"cannot write {link}: {LINK_REFUSED}"
    assert link.is_symlink() and link.readlink() == victim
    assert victim.read_text() == "keep" and mode(victim) == 0o644
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out.md", "precious", "theirs"]


@pytest.mark.parametrize("replace", [True, False])
def test_a_dangling_link_never_creates_its_target(tmp_path: Path, replace: bool) -> None:
    victim = tmp_path / "elsewhere" / "created"
    victim.parent.mkdir()
    link = tmp_path / "out.md"
    link.symlink_to(victim)
    with pytest.raises(ExportError, match="symbolic link"):
        write_atomic(link, ["new"], replace=replace)
    assert not victim.exists() and link.is_symlink()


def test_a_link_that_appears_after_the_check_is_replaced_never_written_through(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "precious"
    victim.write_text("keep")
    target = tmp_path / "out.md"

    def racing() -> Iterator[str]:
        yield "mine"
        target.symlink_to(victim)  # planted between the check and the rename

    write_atomic(target, racing(), replace=True)
    assert not target.is_symlink() and target.read_text() == "mine"
    assert victim.read_text() == "keep"


def test_a_failing_render_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.md"
    target.write_text("old")

    def broken() -> Iterator[str]:
        yield "half of the new "
        raise StorageError("database vanished")

    with pytest.raises(StorageError, match="database vanished"):
        write_atomic(target, broken(), replace=True)
    assert target.read_text() == "old"
    assert list(tmp_path.iterdir()) == [target]


def test_an_unwritable_target_is_a_one_line_export_error(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    (target / "inside").write_text("keep")

    with pytest.raises(ExportError) as caught:
        write_atomic(target, ["text"], replace=True)
    assert str(caught.value) == f"cannot write {target}: it is not a regular file"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert (target / "inside").read_text() == "keep"
    with pytest.raises(ExportError, match="^cannot write to "):
        write_atomic(tmp_path / "missing" / "out.md", ["text"], replace=True)


def test_a_fifo_at_the_target_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ExportError) as caught:
        write_atomic(fifo, ["text"], replace=True)
    assert str(caught.value) == f"cannot write {fifo}: it is not a regular file"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert list(tmp_path.iterdir()) == [fifo]


def test_a_new_file_filled_by_another_writer_lands_whole_or_not_at_all(tmp_path: Path) -> None:
    target = tmp_path / "copy.db"
    with pytest.raises(RuntimeError), new_file(target, replace=False) as temp:
        temp.write_bytes(b"half")
        raise RuntimeError("the copy failed")
    assert list(tmp_path.iterdir()) == []
    with new_file(target, replace=False) as temp:
        assert temp.parent == tmp_path and temp.read_bytes() == b"" and mode(temp) == 0o600
        temp.write_bytes(b"whole")
    assert target.read_bytes() == b"whole"
    assert list(tmp_path.iterdir()) == [target]
