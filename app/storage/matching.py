"""How a history search matches: the SQL filter for its terms, the query over every message
of every branch, and the snippet it shows."""

from __future__ import annotations

import re
from typing import Final

from sqlite_utils import Database

from app.storage.models import SearchHit
from app.storage.rows import stored_role

SNIPPET_BEFORE: Final = 30
"""Characters a snippet keeps before the first match."""
SNIPPET_AFTER: Final = 60
"""Characters a snippet keeps after the end of the first match."""


def search(db: Database, text: str, limit: int | None) -> list[SearchHit]:
    """Messages containing every whitespace-separated term of `text`, newest first, at most
    `limit` (None: all).

    Terms are matched literally and case-insensitively as substrings (no query syntax), in
    the answer or the reasoning.
    """
    terms = text.split()
    if not terms:
        return []
    where, params = match_filter(terms)
    sql = (
        "SELECT m.id, m.conversation_id, m.role, c.title, m.content, m.reasoning"
        " FROM messages AS m JOIN conversations AS c ON c.id = m.conversation_id"
        f" WHERE {where} ORDER BY m.id DESC LIMIT ?"
    )
    return [
        SearchHit(
            conversation_id=row["conversation_id"],
            message_id=row["id"],
            title=row["title"],
            snippet=snippet(row["content"], row["reasoning"], terms),
            role=stored_role(row["role"]),
        )
        for row in db.query(sql, [*params, -1 if limit is None else limit])
    ]


def count_matches(db: Database, text: str) -> int:
    """How many messages `search` would find without a limit."""
    terms = text.split()
    if not terms:
        return 0
    where, params = match_filter(terms)
    (row,) = db.query(f"SELECT count(*) AS n FROM messages AS m WHERE {where}", params)
    return int(row["n"])


def match_filter(terms: list[str]) -> tuple[str, list[str]]:
    """The WHERE clause (over `messages AS m`) and its parameters matching every term."""
    where, params = [], []
    long_terms = [term for term in terms if len(term) >= 3]
    if long_terms:
        where.append("m.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)")
        params.append(" ".join('"' + term.replace('"', '""') + '"' for term in long_terms))
    for term in terms:
        if len(term) < 3:  # below the trigram index's reach
            where.append(r"(m.content LIKE ? ESCAPE '\' OR m.reasoning LIKE ? ESCAPE '\')")
            pattern = "%" + re.sub(r"([\\%_])", r"\\\1", term) + "%"
            params += [pattern, pattern]
    return " AND ".join(where), params


def snippet(content: str, reasoning: str, terms: list[str]) -> str:
    """One line around the first match, cut between words, matches marked «like this»."""
    pattern = re.compile("|".join(re.escape(term) for term in terms), re.IGNORECASE)
    text = content if pattern.search(content) else reasoning
    text = " ".join(text.split())
    first = pattern.search(text)
    at, to = (first.start(), first.end()) if first else (0, 0)
    start = max(0, at - SNIPPET_BEFORE)
    if start and text[start - 1] != " ":  # mid-word: start at the next word, if before `at`
        start = text.find(" ", start, at) + 1 or start
    end = min(len(text), to + SNIPPET_AFTER)
    if end < len(text) and text[end] != " ":  # mid-word: end after the word before, if any
        space = text.rfind(" ", to, end)
        end = space if space != -1 else end
    excerpt = pattern.sub(lambda match: f"«{match.group()}»", text[start:end])
    return ("…" if start else "") + excerpt + ("…" if end < len(text) else "")
