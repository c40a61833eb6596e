"""The chat history: a migrated SQLite file, crash-safe reply writing, and exports."""

from app.storage.models import Conversation, EngineRun, MessageStatus, SearchHit, StoredMessage
from app.storage.store import ChatStore
from app.storage.writer import ReplyWriter

__all__ = [
    "ChatStore",
    "Conversation",
    "EngineRun",
    "MessageStatus",
    "ReplyWriter",
    "SearchHit",
    "StoredMessage",
]
