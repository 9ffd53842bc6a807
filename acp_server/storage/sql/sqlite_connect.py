"""Connections to a SQLite store's database file: opening one, its transactions, telling a
damaged file apart from a busy or failing one, and a session's single-writer claim (an
exclusive `flock` on a lock file of its own, released with its descriptor when the process
dies).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from ..errors import CorruptLog, LogLocked

BUSY_TIMEOUT_MS: Final = 10_000
"""How long a transaction waits for another connection's write to end."""


def connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, mode: str = "IMMEDIATE") -> Iterator[None]:
    db.execute(f"BEGIN {mode}")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # A failed COMMIT leaves the transaction open: it is undone, as a failed body is.
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


DAMAGE: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
"""The primary result codes of a database file that is not what SQLite wrote."""


def is_damage(exc: sqlite3.Error) -> bool:
    # Only these: a busy database, a failing disk or a full one are `OperationalError`s (also
    # `DatabaseError`s) and keep their own meaning. Extended codes carry the primary one in
    # their low byte (SQLITE_CORRUPT_INDEX, ...).
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in DAMAGE


@contextlib.contextmanager
def damage_is_corrupt(where: str, line: Callable[[], int]) -> Iterator[None]:
    """A damaged database met inside as the `CorruptLog` of `where`, at `line()`."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if not is_damage(exc):
            raise
        raise CorruptLog(where, line(), f"the database is damaged: {exc}") from None


def os_error(exc: sqlite3.Error) -> OSError:
    """A database failure as the OSError a writer's `failure` holds."""
    code = getattr(exc, "sqlite_errorcode", None)
    number = errno.ENOSPC if code == sqlite3.SQLITE_FULL else errno.EIO
    return OSError(number, str(exc))


class Claim:
    """The single-writer claim of one session: an exclusive `flock` on its lock file."""

    def __init__(self, path: Path, owner: str) -> None:
        path.parent.mkdir(exist_ok=True)
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise LogLocked(
                f"{owner}: the session is open for writing in another process"
            ) from None

    def release(self, *, remove: bool = False) -> None:
        if self.fd < 0:
            return
        if remove:
            with contextlib.suppress(OSError):
                self.path.unlink()
        os.close(self.fd)
        self.fd = -1
