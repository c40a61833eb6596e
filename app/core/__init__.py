"""Shared records: chat, errors, the proof's report, reply usage, durations, the server wait."""
