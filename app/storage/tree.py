"""A conversation's messages as a tree: the path on screen, each message's alternatives, and
the writes that keep it (a new message becomes its parent's chosen child; choosing one makes
it and its ancestors the chosen).

Nothing is overwritten: a regenerated reply is a new child of the same question, an edited
question a new child of the same parent. The path on screen starts at the chosen first
message and goes on through each message's chosen child; where several children are marked
chosen (a damaged or hand-made history) the newest wins, where none is, the newest child.
A message whose parent is not in its conversation reads as a first message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlite_utils import Database

from app.storage import rows
from app.storage.models import StoredMessage


def path(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """The path on screen through a conversation's messages (every branch, in any order)."""
    children = _children(messages)
    shown: list[StoredMessage] = []
    parent: int | None = None
    while kids := children.get(parent):
        chosen = [kid for kid in kids if kid.chosen] or kids
        shown.append(chosen[-1])
        parent = chosen[-1].id
    return shown


def alternatives(messages: Sequence[StoredMessage], message_id: int) -> list[StoredMessage]:
    """The message and its siblings (the same parent), oldest first; empty for an unknown id."""
    ids = {message.id for message in messages}
    found = [message for message in messages if message.id == message_id]
    if not found:
        return []
    parent = _parent(found[0], ids)
    return _children(messages).get(parent, [])


def places(messages: Sequence[StoredMessage]) -> dict[int, tuple[int, int]]:
    """Each message's place among its alternatives: (position from 1, oldest first; how
    many), by id."""
    return {
        kid.id: (position, len(kids))
        for kids in _children(messages).values()
        for position, kid in enumerate(kids, start=1)
    }


def add(db: Database, row: dict[str, Any]) -> int:
    """Insert a message (`row`: a `messages` row with its `parent_id`) as its parent's chosen
    child; returns its id."""
    message_id = rows.insert(db, "messages", {**row, "chosen": 1})
    _choose_among_siblings(db, row["conversation_id"], row["parent_id"], message_id)
    return message_id


def choose(db: Database, message_id: int) -> bool:
    """Put a message on the path on screen: it and each of its ancestors become their
    parent's chosen child. False when there is no such message."""
    sql = "SELECT conversation_id, parent_id FROM messages WHERE id = ?"
    current: int | None = message_id
    seen: set[int] = set()
    while current is not None and current not in seen:  # a damaged loop ends too
        seen.add(current)
        found = db.conn.execute(sql, [current]).fetchone()
        if found is None:
            return current != message_id
        conversation_id, parent_id = found
        _choose_among_siblings(db, conversation_id, parent_id, current)
        current = parent_id
    return True


def last_on_path(db: Database, conversation_id: int) -> int | None:
    """The id of the last message on screen; None for a conversation without messages."""
    shown = path(rows.select_messages(db, "m.conversation_id = ?", [conversation_id]))
    return shown[-1].id if shown else None


MessageKey = tuple[int | None, str, str, str]
"""What makes an imported message one already there: parent, role, creation time, text."""


def same_as(row: dict[str, Any]) -> MessageKey:
    """The key of a `messages` row that an import matches on."""
    return (row["parent_id"], row["role"], row["created_at"], row["content"])


def known(db: Database, conversation_id: int) -> dict[MessageKey, int]:
    """Each message of a conversation by its `same_as` key."""
    sql = "SELECT parent_id, role, created_at, content, id FROM messages WHERE conversation_id = ?"
    return {
        (parent_id, role, created_at, content): message_id
        for parent_id, role, created_at, content, message_id in db.conn.execute(
            sql, [conversation_id]
        )
    }


def _choose_among_siblings(
    db: Database, conversation_id: int, parent_id: int | None, message_id: int
) -> None:
    db.execute(
        "UPDATE messages SET chosen = (id = ?)"
        " WHERE conversation_id = ? AND parent_id IS ? AND chosen != (id = ?)",
        [message_id, conversation_id, parent_id, message_id],
    )


def _children(messages: Sequence[StoredMessage]) -> dict[int | None, list[StoredMessage]]:
    """Each parent's children, oldest first (None: the first messages)."""
    ids = {message.id for message in messages}
    children: dict[int | None, list[StoredMessage]] = {}
    for message in sorted(messages, key=lambda m: m.id):
        children.setdefault(_parent(message, ids), []).append(message)
    return children


def _parent(message: StoredMessage, ids: set[int]) -> int | None:
    return message.parent_id if message.parent_id in ids else None
