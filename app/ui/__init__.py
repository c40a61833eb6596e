"""The Textual user interface; it sees the model only through `ChatBackend`."""

from app.ui.app import LingChatApp

__all__ = ["LingChatApp"]
