"""Writing a streamed reply so that a crash loses at most one flush interval of text."""

from __future__ import annotations

from collections.abc import Callable

from sqlite_utils import Database

from app.core.chat import Role
from app.core.errors import StorageError
from app.storage import rows, tree
from app.storage.database import Connection, utc_now
from app.storage.models import MessageStatus, StoredMessage
from app.telemetry import ReplyStats


class ReplyWriter:
    """Stores one assistant reply while it streams; get one from `ChatStore.start_reply`.

    The row is created as the chosen child of `parent_id` (`tree`), with status `partial`,
    by the first `append` that carries text (if that commit fails, the text stays buffered
    and the next commit creates it); later
    text is committed once `flush_interval_s` has passed since the last commit, so a
    killed process leaves a `partial` reply holding everything flushed before the kill.

    Continuing a stored reply (`ChatStore.continue_reply`), the writer extends that row:
    its text goes on from the stored text, and `finish` replaces its measurements.
    """

    def __init__(
        self,
        connection: Connection,
        conversation_id: int,
        *,
        parent_id: int | None,
        engine_run_id: int | None,
        flush_interval_s: float,
        clock: Callable[[], float],
        continuing: StoredMessage | None = None,
    ) -> None:
        self.message_id: int | None = continuing.id if continuing is not None else None
        """None until the row exists (the first text was committed)."""
        self._connection = connection
        self._conversation_id = conversation_id
        self._parent_id = parent_id
        self._engine_run_id = engine_run_id
        self._flush_interval_s = flush_interval_s
        self._clock = clock
        self._answer: list[str] = [continuing.content] if continuing is not None else []
        self._reasoning: list[str] = [continuing.reasoning] if continuing is not None else []
        self._dirty = False
        self._flushed_at = 0.0
        self._finished = False

    def append(self, answer: str = "", reasoning: str = "") -> None:
        """Add text deltas; empty deltas are ignored.

        Args:
            answer: new text of the answer.
            reasoning: new text of the reasoning (thinking) part.
        """
        self._check_open()
        if not answer and not reasoning:
            return
        self._answer.append(answer)
        self._reasoning.append(reasoning)
        self._dirty = True
        if self.message_id is None or self._clock() - self._flushed_at >= self._flush_interval_s:
            self.flush()

    def flush(self) -> None:
        """Commit the text received so far now (e.g. from a timer while the stream stalls).

        The first commit creates the row; until one succeeds the text stays buffered.
        """
        self._check_open()
        if not self._dirty:
            return
        with self._connection.write() as db:
            message_id = self.message_id
            if message_id is None:
                message_id = self._insert(db, MessageStatus.PARTIAL, None, utc_now())
            else:
                db.execute(
                    "UPDATE messages SET content = ?, reasoning = ?, updated_at = ? WHERE id = ?",
                    [*self._text(), utc_now(), message_id],
                )
        self.message_id = message_id
        self._mark_flushed()

    def finish(
        self,
        status: MessageStatus,
        stats: ReplyStats | None = None,
        error: str | None = None,
        *,
        cut_reason: str | None = None,
        wait: bool = True,
    ) -> StoredMessage | None:
        """Store the final text, status and measurements in one transaction.

        A reply that never produced text (none was appended) leaves no row and returns
        None (the user's message stays, ready to be sent again), except with status
        ERROR: that one is stored, empty, to keep the error. Text whose row could not be
        created yet is stored here. If this raises StorageError the reply stays as last
        flushed and `finish` may be called again.

        Args:
            status: how the reply ended.
            stats: the reply's measurements, if any.
            error: what went wrong, for status ERROR.
            cut_reason: the limit that cut the reply off, for status CUT.
            wait: wait out a busy database (up to the busy timeout); False fails at once.

        Returns:
            The stored reply, or None when nothing was stored or the reply (or its
            conversation) was deleted while it streamed.
        """
        self._check_open()
        if not any(self._text()) and status is not MessageStatus.ERROR:
            self._finished = True
            return None
        now = utc_now()
        with self._connection.write(wait=wait) as db:
            message_id = self.message_id
            if message_id is None:
                message_id = self._insert(db, status, error, now, cut_reason)
            elif not db.execute(
                "UPDATE messages SET content = ?, reasoning = ?, status = ?, error = ?,"
                " cut_reason = ?, updated_at = ? WHERE id = ?",
                [*self._text(), status.value, error, cut_reason, now, message_id],
            ).rowcount:
                self._finished = True
                return None
            if stats is not None:
                db.execute("DELETE FROM measurements WHERE message_id = ?", [message_id])
                measured = rows.measurement(message_id, self._engine_run_id, stats)
                db.table("measurements").insert(measured)
            rows.touch(db, self._conversation_id, now)
            (message,) = rows.select_messages(db, "m.id = ?", [message_id])
        self.message_id = message_id
        self._finished = True
        return message

    def leave(self) -> None:
        """End without writing: a continuation that brought nothing leaves its reply as it
        was (its text, status and measurements)."""
        self._finished = True

    def _insert(
        self,
        db: Database,
        status: MessageStatus,
        error: str | None,
        now: str,
        cut_reason: str | None = None,
    ) -> int:
        if not rows.touch(db, self._conversation_id, now):
            raise StorageError(f"no conversation {self._conversation_id}")
        content, reasoning = self._text()
        row = {
            "conversation_id": self._conversation_id,
            "role": Role.ASSISTANT.value,
            "content": content,
            "reasoning": reasoning,
            "status": status.value,
            "error": error,
            "cut_reason": cut_reason,
            "created_at": now,
            "updated_at": now,
            "parent_id": self._parent_id,
        }
        return tree.add(db, row)

    def _text(self) -> tuple[str, str]:
        """The answer and reasoning so far (joined once, so appends stay cheap)."""
        self._answer = ["".join(self._answer)]
        self._reasoning = ["".join(self._reasoning)]
        return self._answer[0], self._reasoning[0]

    def _mark_flushed(self) -> None:
        self._dirty = False
        self._flushed_at = self._clock()

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError("this reply is already finished")
