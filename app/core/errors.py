"""The errors ling-chat reports to the user, one line each.

LingChatError                 str(error) is the one line the user sees
├── ConfigError               a broken config file or a bad setting
│   └── LeverOverridden       a setting contradicts a profile's lever (exit status 2)
├── StorageError              the history database cannot be used
│   ├── DatabaseCorrupt       the file is not a usable SQLite database (left untouched)
│   └── DatabaseLocked        another process holds the write lock past the busy timeout
├── BackendError              the model side failed
│   ├── ModelNotFound         the model path or checkpoint does not exist
│   ├── EngineCrashed         SGLang's scheduler died
│   ├── ProofFailed           an optimization is not engaged: refuse to start
│   ├── ServerError           a remote server refused, timed out or broke a stream
│   │   └── BadServerAnswer   an answer past a size or nesting limit, or not JSON
│   ├── NotEnoughDisk         a download would not fit on the cache's disk (backend/download.py)
│   ├── DownloadFailed        a download stopped; what arrived whole stays (backend/download.py)
│   └── CheckpointRefused     a checkpoint the loader cannot read (also a PreflightFailed)
├── ContextFull               the conversation leaves no room in the model's context
├── PreflightFailed           the machine cannot start the engine safely (exit status 3)
├── ExportError               an export could not be written
└── ImportFailed              an export file could not be read back (nothing was added)
"""


class LingChatError(Exception):
    """Base of every error shown to the user; `str()` is the message."""


class ConfigError(LingChatError):
    """A config file or setting is invalid."""


class LeverOverridden(ConfigError):
    """An `--sglang-arg` or variable contradicts a profile's lever: refused before loading."""


class StorageError(LingChatError):
    """The history database cannot be used."""


class DatabaseCorrupt(StorageError):
    """The database file is not a usable SQLite database."""


class DatabaseLocked(StorageError):
    """The database stayed locked past the busy timeout."""


class BackendError(LingChatError):
    """The model backend failed."""


class ModelNotFound(BackendError):
    """The model path does not exist or holds no checkpoint."""


class EngineCrashed(BackendError):
    """SGLang's scheduler or detokenizer process died."""


class ProofFailed(BackendError):
    """At least one optimization is not engaged; the report says which."""


class ServerError(BackendError):
    """A remote SGLang server could not be used."""


class BadServerAnswer(ServerError):
    """A server's answer is too long, nests too deep or is not JSON."""


class ContextFull(LingChatError):
    """The conversation fills the model's context: no token is left for a reply."""


class ExportError(LingChatError):
    """An export could not be written."""


class ImportFailed(LingChatError):
    """An export file could not be read back into the history; nothing was added."""


class PreflightFailed(LingChatError):
    """The machine cannot start the engine safely; each failed check was printed."""


class CheckpointRefused(BackendError, PreflightFailed):
    """A downloaded checkpoint lacks a tensor the loader reads, or holds one it cannot read:
    a start error where the engine starts (the chat's start-up screen), a preflight refusal
    (exit 3) for the commands."""
