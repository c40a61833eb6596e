"""Human-readable renderings of stored chats: speed lines, Markdown and a standalone HTML page."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from html import escape

from app.core.chat import Role, thinking_words
from app.render.figures import speed_line
from app.storage.models import Conversation, MessageStatus, StoredMessage, Thread
from app.storage.tree import path

SPEAKERS = {Role.USER: "You", Role.ASSISTANT: "Ling", Role.SYSTEM: "System"}
"""How each role is labelled for people."""


UNKNOWN_TIME = "unknown time"
"""What a stored timestamp that is no ISO-8601 date shows as."""


def local_time(iso: str) -> str:
    """A stored UTC timestamp as local `YYYY-MM-DD HH:MM` (`UNKNOWN_TIME` if it is no date)."""
    try:
        return datetime.fromisoformat(iso).astimezone().strftime("%Y-%m-%d %H:%M")
    except (TypeError, ValueError, OverflowError):
        return UNKNOWN_TIME


def status_note(message: StoredMessage) -> str:
    """Why a message is not complete, or empty when it is."""
    if message.status is MessageStatus.PARTIAL:
        return "partial"
    if message.status is MessageStatus.STOPPED:
        return "stopped"
    if message.status is MessageStatus.CUT:
        return f"cut off by {message.cut_reason}" if message.cut_reason else "cut off"
    if message.status is MessageStatus.ERROR:
        return f"error: {message.error}" if message.error else "error"
    return ""


def attached_line(message: StoredMessage) -> str:
    """The files a message carries (`Attached: notes.md, log.txt`), or empty."""
    return f"Attached: {', '.join(message.attachments)}" if message.attachments else ""


def settings_line(conversation: Conversation) -> str:
    """Model, sampling and thinking on one line."""
    s = conversation.sampling
    return (
        f"model {conversation.model or 'unknown'} · temperature {s.temperature:g} · "
        f"top_p {s.top_p:g} · top_k {s.top_k} · max {s.max_new_tokens} tokens · "
        f"{thinking_words(conversation.thinking)}"
    )


def markdown(threads: Sequence[Thread]) -> Iterator[str]:
    """The conversations as one Markdown document, each the path on screen (`tree`);
    reasoning folds into `<details>`."""
    if not threads:
        yield "# ling-chat history\n\n_No conversations._\n"
    for index, thread in enumerate(threads):
        if index:
            yield "\n---\n\n"
        yield from _markdown_thread(thread)


def _markdown_thread(thread: Thread) -> Iterator[str]:
    conversation = thread.conversation
    archived = " · archived" if conversation.archived else ""
    yield f"# {conversation.title}\n\n"
    yield (
        f"_Conversation {conversation.id} · started {local_time(conversation.created_at)}"
        f"{archived} · {settings_line(conversation)}_\n\n"
    )
    if conversation.system_prompt:
        quoted = "\n".join(f"> {line}" for line in conversation.system_prompt.splitlines())
        yield f"> **System prompt**\n>\n{quoted}\n\n"
    for message in path(thread.messages):
        yield f"## {SPEAKERS[message.role]} · {local_time(message.created_at)}\n\n"
        if message.reasoning:
            yield f"<details><summary>Reasoning</summary>\n\n{message.reasoning}\n\n</details>\n\n"
        if attached := attached_line(message):
            yield f"_{attached}_\n\n"
        if message.content:
            yield f"{message.content}\n\n"
        if line := speed_line(message.stats):
            yield f"_{line}_\n\n"
        if note := status_note(message):
            yield f"_({note})_\n\n"


_CSS = """
body{font:15px/1.5 system-ui,sans-serif;max-width:48rem;margin:2rem auto;padding:0 1rem;
color:#1d1d1f;background:#fff}
@media(prefers-color-scheme:dark){body{color:#e6e6e6;background:#17171a}
.msg{border-color:#333}.meta,.speed,.note{color:#999}}
article{margin-bottom:3rem}.meta{color:#666;font-size:.85rem}
.msg{border-left:3px solid #ddd;padding:.25rem .75rem;margin:1rem 0}
.msg.user{border-color:#4a7bd0}.msg.assistant{border-color:#2e9d6a}
.who{font-weight:600;font-size:.9rem}.text{white-space:pre-wrap;overflow-wrap:anywhere}
.system{font-style:italic}.speed,.note{color:#666;font-size:.85rem;font-style:italic}
summary{cursor:pointer;color:#888}
"""


def html_page(threads: Sequence[Thread]) -> Iterator[str]:
    """The conversations as one self-contained HTML page (inline CSS, all text escaped), each
    the path on screen (`tree`)."""
    title = escape(threads[0].conversation.title) if len(threads) == 1 else "ling-chat history"
    yield (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
    )
    if not threads:
        yield "<h1>ling-chat history</h1>\n<p>No conversations.</p>\n"
    for thread in threads:
        yield from _html_thread(thread)
    yield "</body>\n</html>\n"


def _html_thread(thread: Thread) -> Iterator[str]:
    conversation = thread.conversation
    archived = " · archived" if conversation.archived else ""
    yield f'<article id="conversation-{conversation.id}">\n'
    yield f"<h1>{escape(conversation.title)}</h1>\n"
    yield (
        f'<p class="meta">Conversation {conversation.id} · started '
        f"{local_time(conversation.created_at)}{archived} · "
        f"{escape(settings_line(conversation))}</p>\n"
    )
    if conversation.system_prompt:
        yield (
            '<div class="msg system"><div class="who">System prompt</div>'
            f'<div class="text">{escape(conversation.system_prompt)}</div></div>\n'
        )
    for message in path(thread.messages):
        yield (
            f'<div class="msg {message.role.value}"><div class="who">'
            f"{SPEAKERS[message.role]} · {local_time(message.created_at)}</div>\n"
        )
        if message.reasoning:
            yield (
                "<details><summary>Reasoning</summary>"
                f'<div class="text">{escape(message.reasoning)}</div></details>\n'
            )
        if attached := attached_line(message):
            yield f'<p class="note">{escape(attached)}</p>\n'
        if message.content:
            yield f'<div class="text">{escape(message.content)}</div>\n'
        if line := speed_line(message.stats):
            yield f'<p class="speed">{escape(line)}</p>\n'
        if note := status_note(message):
            yield f'<p class="note">({escape(note)})</p>\n'
        yield "</div>\n"
    yield "</article>\n"
