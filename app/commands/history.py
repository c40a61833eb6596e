"""List past conversations (newest first), search them, show one (`history show ID`),
hide one from the list without deleting it (`history archive ID`, `history unarchive ID`),
copy the whole history to a new file (`history backup FILE`), or see how decoding slowed as
the conversations grew (`history stats`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from app.commands.common import (
    add_data_arguments,
    add_force_argument,
    add_raw_argument,
    force_hint,
    settings_from,
)
from app.core.chat import Role
from app.render.chats import SPEAKERS, local_time, settings_line, status_note
from app.render.figures import speed_line
from app.render.speed import speed_by_context
from app.storage import ChatStore, Conversation, StoredMessage
from app.textsafe import one_line

EMPTY = (
    "No conversations yet: `ling-chat` starts one on this machine's GPU, `ling-chat --server "
    "URL` on a running server (a `--replay demo` session is a demonstration, not kept here)."
)
"""The list of an empty history: where a chat that is kept can come from."""
LIMIT = 50
"""Conversations or search hits shown when `--limit` is not given."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`--search`, `--all`, `--limit`, `--data-dir`, and the actions on conversations."""
    parser.add_argument("--search", metavar="TEXT", help="only messages containing TEXT")
    parser.add_argument("--all", action="store_true", help="include archived conversations")
    parser.add_argument(
        "--limit",
        type=_count,
        metavar="N",
        help=f"show at most N entries (default {LIMIT}; 0: all of them)",
    )
    add_data_arguments(parser)
    add_raw_argument(parser)
    actions = parser.add_subparsers(dest="history_action", metavar="ACTION")
    show = actions.add_parser(
        "show", help="print one conversation", description="Print one conversation."
    )
    show.add_argument("id", type=int, metavar="ID", help="conversation id (see `history`)")
    add_raw_argument(show)
    for action, summary in (
        ("archive", "hide a conversation from the lists (`--all` still shows it)"),
        ("unarchive", "show an archived conversation in the lists again"),
    ):
        sub = actions.add_parser(action, help=summary, description=f"{summary.capitalize()}.")
        sub.add_argument("id", type=int, metavar="ID", help="conversation id (see `history --all`)")
    backup = actions.add_parser(
        "backup",
        help="copy the whole history to a new SQLite file",
        description="Copy the whole history, consistently, to a new SQLite file (VACUUM INTO).",
    )
    backup.add_argument(
        "file", type=Path, metavar="FILE", help="the copy to write (a new file unless --force)"
    )
    add_force_argument(backup, "FILE")
    actions.add_parser(
        "stats",
        help="decode speed, TTFT and accept length by context length",
        description=(
            "Decode speed, TTFT and accept length of the stored replies by the context they "
            "decoded on (prompt tokens), per model, profile and engine. Complete and stopped "
            "replies count, pooled (a long reply weighs more). Every reply's numbers: "
            "`ling-chat export -o FILE.csv`."
        ),
    )


def run(args: argparse.Namespace) -> int:
    """Print the list, the search hits or one conversation."""
    name = str if getattr(args, "raw", False) else one_line
    changes = args.history_action in ("archive", "unarchive")
    opened = ChatStore.open if changes else ChatStore.open_to_read
    with opened(settings_from(args).db_path) as store:
        if args.history_action == "show":
            conversation = store.get_conversation(args.id)
            print(_render_conversation(conversation, store.messages(conversation.id), name))
        elif args.history_action == "stats":
            print(speed_by_context(store))
        elif args.history_action == "backup":
            with force_hint():
                store.backup(args.file, replace=args.force)
            count = len(store.list_conversations(include_archived=True))
            print(f"Backed up {count} conversation{'s' * (count != 1)} to {args.file}")
        elif args.history_action in ("archive", "unarchive"):
            conversation = store.get_conversation(args.id)
            store.set_archived(conversation.id, args.history_action == "archive")
            print(f"#{conversation.id} {name(conversation.title)}: {args.history_action}d")
        elif args.search is not None:
            _print_hits(store, args.search, args.limit, name)
        else:
            _print_list(store, args.all, args.limit, name)
    return 0


def _count(text: str) -> int:
    """`--limit`'s value: a whole number, 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number, 0 or more")
    return int(text)


def _print_list(
    store: ChatStore, include_archived: bool, limit: int | None, name: Callable[[str], str]
) -> None:
    shown = LIMIT if limit is None else limit
    conversations = store.list_conversations(include_archived=include_archived, limit=shown or None)
    if not conversations:
        print(EMPTY)
        return
    counts = store.message_counts()
    width = max(2, len(str(max(c.id for c in conversations))))
    print(f"{'ID':>{width}}  {'UPDATED':16}  {'MSGS':>4}  TITLE")
    for c in conversations:
        archived = "  (archived)" if c.archived else ""
        print(
            f"{c.id:>{width}}  {local_time(c.updated_at):16}  {counts.get(c.id, 0):>4}  "
            f"{name(c.title)}{archived}"
        )
    if len(conversations) == shown:
        more = store.count_conversations(include_archived=include_archived) - shown
        if more > 0:
            print(f"{more:,} more; --limit N shows N (--limit 0: all)")


def _print_hits(store: ChatStore, text: str, limit: int | None, name: Callable[[str], str]) -> None:
    shown = LIMIT if limit is None else limit
    hits = store.search(text, limit=shown or None)
    if not hits:
        print(f"No messages contain {text!r}.")
        return
    lines: dict[tuple[int, Role, str, str], list[int]] = {}
    for hit in hits:  # identical snippets of one conversation share a line
        lines.setdefault((hit.conversation_id, hit.role, hit.title, hit.snippet), []).append(
            hit.message_id
        )
    ids = {key: " ".join(f"#{message_id}" for message_id in found) for key, found in lines.items()}
    width = len(str(max(hit.conversation_id for hit in hits)))
    ids_width = max(len(text) for text in ids.values())
    for (conversation_id, role, title, snippet), message_ids in ids.items():
        print(
            f"{conversation_id:>{width}}  {message_ids:<{ids_width}}  {SPEAKERS[role]:<4}  "
            f"{name(title)}: {snippet}"
        )
    if len(hits) == shown and (more := store.count_matches(text) - shown) > 0:
        print(f"{more:,} more; narrow the search or use --limit (0: all)")


def _render_conversation(
    conversation: Conversation, messages: list[StoredMessage], name: Callable[[str], str]
) -> str:
    lines = [
        f"#{conversation.id} {name(conversation.title)}",
        f"started {local_time(conversation.created_at)} · {settings_line(conversation)}",
    ]
    if conversation.system_prompt:
        lines += ["", "System prompt:", _indent(conversation.system_prompt)]
    for message in messages:
        lines += ["", f"{SPEAKERS[message.role]} · {local_time(message.created_at)}"]
        if message.reasoning:
            lines += ["  (reasoning)", _indent(message.reasoning, "  │ ")]
        if message.content:
            lines.append(_indent(message.content))
        if speed := speed_line(message.stats):
            lines.append(f"  {speed}")
        if note := status_note(message):
            lines.append(f"  ({note})")
    if not messages:
        lines += ["", "(no messages)"]
    return "\n".join(lines)


def _indent(text: str, prefix: str = "  ") -> str:
    return "\n".join((prefix + line).rstrip() for line in text.splitlines())
