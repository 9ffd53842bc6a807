"""The errors every store engine raises, whatever holds the logs (SPEC 2.3 to 2.6).

`where` in a message is what names the log to a person: a file path for JSONL, the store's
URL (password hidden) and the session id for a database.
"""

from __future__ import annotations

import errno
from pathlib import Path

from ..core.header import SESSION_FORMAT_VERSION


class LogError(Exception):
    """A session log cannot be used; the message says why."""


class CorruptLog(LogError):
    """A log line is malformed, or the events have a seq gap; names the file and line."""

    def __init__(self, path: Path | str, line: int, reason: str) -> None:
        super().__init__(f"{path}: line {line}: {reason}")
        self.path = str(path)
        self.line = line
        self.reason = reason


class UnsupportedVersion(LogError):
    """The log was written in another format version than this build reads."""

    def __init__(self, path: Path | str, found: object) -> None:
        super().__init__(
            f"{path}: unsupported session format version {found!r} "
            f"(this build reads version {SESSION_FORMAT_VERSION})"
        )
        self.path = str(path)
        self.found = found
        self.supported = SESSION_FORMAT_VERSION


class LogLocked(LogError):
    """Another writer holds the log (SPEC 2.4: one writer at a time)."""


class LogWriteFailed(LogError):
    """The log cannot be written: the disk is full, read-only, failing... (`cause` says which).

    Raised by the write that failed and by every later one on the same writer: nothing more
    is written to the log until it is reopened (`LogWriter.reset`, or a new writer).
    """

    def __init__(self, path: Path | str, cause: OSError) -> None:
        super().__init__(f"{path}: cannot write the log: {cause.strerror or cause}")
        self.path = str(path)
        self.cause = cause
        self.errno = cause.errno


class DamagedStore(LogError):
    """The store is there but its data cannot be read as a store: a database file that is
    damaged or is not a database. A problem found, where `UnsupportedStore` could not even look."""


class SessionNotFound(LogError):
    """No log exists for the session id."""


class SessionExists(LogError):
    """`create` found the session already there."""


class StaleWriter(LogWriteFailed):
    """A batch did not start at the session's stored next seq: another writer appended to it.
    The writer refuses every later write, as after any failed write."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(path, OSError(errno.EBUSY, reason))


class UnsupportedStore(LogError):
    """A store whose schema version this build does not read, or a URL it cannot open."""
