"""ling-chat: a terminal chat app for Ling-3.0-flash with proven decode optimizations."""

__version__ = "0.1.0"
