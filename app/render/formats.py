"""Export format name (also the file extension) -> the text of an export."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from app.render.chats import html_page, markdown
from app.storage.transfer.export import Export, as_csv, as_json, as_jsonl

FORMATS: dict[str, Callable[[Export], Iterable[str]]] = {
    "md": lambda export: markdown(export.threads),
    "json": as_json,
    "jsonl": as_jsonl,
    "html": lambda export: html_page(export.threads),
    "csv": as_csv,
}
"""Export format name -> renderer, in the order `ling-chat export --help` lists them."""
