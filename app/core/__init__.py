"""Shared records and profiles: chat, errors, the proof's report, reply usage, profiles."""
