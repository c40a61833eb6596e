"""Secrets never reach a log: a logging filter that masks them, in every process.

The secrets travel in `LING_CHAT_REDACT` (an environment variable only this user can read,
inherited by SGLang's spawned processes), so the logging config file names no secret.
"""

from __future__ import annotations

import logging
import os

REDACT_ENV = "LING_CHAT_REDACT"
MASK = "***"


def protect(secret: str | None) -> None:
    """Mask `secret` in every log line this process and its children write from now on."""
    if secret:
        known = [s for s in os.environ.get(REDACT_ENV, "").split("\n") if s]
        os.environ[REDACT_ENV] = "\n".join([*known, secret])


def redact(text: str) -> str:
    """`text` with every protected secret masked."""
    for secret in os.environ.get(REDACT_ENV, "").split("\n"):
        if secret:
            text = text.replace(secret, MASK)
    return text


class RedactSecrets(logging.Filter):
    """Masks protected secrets in a record's message and its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (masked := redact(message)) != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
