"""A history that has no room left: SQLite's own SQLITE_FULL, from a real database file.

Every test fills the history for real: `PRAGMA max_page_count` on the app's own connection
(SQLite then answers SQLITE_FULL exactly as on a full disk), or, where this process may
mount, a tiny tmpfs filled to the last byte.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from textual.widgets import Label

from app.core.chat import Sampling
from app.core.exit_status import ExitStatus
from app.storage import ChatStore, MessageStatus
from app.ui import LingChatApp
from tests.support.clock import FakeClock
from tests.support.pilot import Notices, chat_screen, reply_done, send, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, answer_reply

SIZE = (120, 40)
LONG = "x" * 50_000
"""More text than the pages the history has left can hold."""


def fill_history(store: ChatStore) -> None:
    """No page more for the app's connection: its next growing write fails with SQLITE_FULL."""
    db = store._connection.db  # the app's own connection: the limit is per connection
    (pages,) = db.execute("PRAGMA page_count").fetchone()
    db.execute(f"PRAGMA max_page_count = {pages}")


def make_room(store: ChatStore) -> None:
    store._connection.db.execute("PRAGMA max_page_count = 1073741823")


async def stream_into_full_history(
    pilot, backend: ScriptedBackendDouble, fill: Callable[[], None], notices: Notices
) -> Path:
    """Send a question, `fill` the history mid-reply; the recovery file named on screen."""
    screen = await chat_screen(pilot)
    await send(pilot, "what is kept?")
    await wait_until(pilot, lambda: backend.chunks_sent == 1)
    fill()
    backend.release()
    await reply_done(pilot)
    await wait_until(pilot, lambda: any("reply's text is in" in n for n in notices.messages))
    (notice,) = [n for n in notices.messages if "reply's text is in" in n]
    footer = list(screen.query(".reply-footer"))[-1]
    assert isinstance(footer, Label) and text_of(footer) == "… partial"
    return Path(notice.rpartition(" is in ")[2])


async def test_a_reply_the_full_history_cannot_take_is_kept_in_a_file_and_the_exit_says_so(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore, db_path: Path
) -> None:
    backend.enqueue(answer_reply("Saved", LONG, hold_after=1))
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        kept = await stream_into_full_history(pilot, backend, partial(fill_history, store), notices)
        # Written at once, not only at quit: a kill now still leaves the text.
        assert kept.parent == db_path.parent
        assert "> what is kept?" in kept.read_text() and LONG in kept.read_text()
        await chat_app.action_quit()
    assert chat_app.return_code == ExitStatus.REPLY_UNSAVED == 4
    assert LONG in kept.read_text()


async def test_once_the_history_has_room_again_the_reply_is_saved_and_its_file_goes(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    backend.enqueue(answer_reply("Saved", LONG, hold_after=1))
    notices = Notices()
    async with chat_app.run_test(size=SIZE, message_hook=notices) as pilot:
        kept = await stream_into_full_history(pilot, backend, partial(fill_history, store), notices)
        make_room(store)
        await wait_until(pilot, lambda: not kept.exists(), timeout=10)
        await chat_app.action_quit()
    assert chat_app.return_code == 0
    (conversation,) = store.list_conversations()
    reply = store.messages(conversation.id)[-1]
    assert reply.content == "Saved" + LONG and reply.status is MessageStatus.COMPLETE


@contextlib.contextmanager
def full_tmpfs(folder: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs at `folder` (skips where this process may not mount)."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): the max_page_count tests cover it")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill_disk(folder: Path) -> None:
    """Write until the filesystem has not one byte left."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (1 << 16, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)


async def test_on_a_really_full_disk_the_reply_goes_where_there_is_room(
    end_to_end: None, tmp_path: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    backend = ScriptedBackendDouble(clock=clock)
    backend.enqueue(answer_reply("Saved", LONG, hold_after=1))
    notices = Notices()
    with full_tmpfs(tmp_path / "disk") as disk, ChatStore.open(disk / "history.db") as store:
        app = LingChatApp(backend, store, sampling=Sampling(), clock=clock, proof_hold_s=0)
        async with app.run_test(size=SIZE, message_hook=notices) as pilot:
            kept = await stream_into_full_history(pilot, backend, partial(fill_disk, disk), notices)
            await app.action_quit()
        assert any("disk is full" in notice for notice in notices.messages)
        assert not list(disk.glob("unsaved-replies-*"))
    assert kept.parent == home
    assert LONG in kept.read_text()
    assert app.return_code == ExitStatus.REPLY_UNSAVED
