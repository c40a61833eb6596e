"""The model side: the protocol the UI sees, and the backends that implement it."""

from app.backend.protocol import (
    BackendInfo,
    ChatBackend,
    LoadStage,
    ProofLine,
    ProofReport,
    ReplyDone,
    ReplyError,
    ReplyEvent,
    TextChunk,
    Verdict,
)

__all__ = [
    "BackendInfo",
    "ChatBackend",
    "LoadStage",
    "ProofLine",
    "ProofReport",
    "ReplyDone",
    "ReplyError",
    "ReplyEvent",
    "TextChunk",
    "Verdict",
]
