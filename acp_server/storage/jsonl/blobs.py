"""A JSONL session's blobs (checkpoints' file contents): files in the session's directory.

`<session>/blobs/<sha256>` holds the bytes whose digest is its name, written to a temporary file
beside it, fsynced and renamed into place, so a blob is whole or absent. Deleting the session
(its whole directory) deletes them. Blocking: called in worker threads.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

from ...core.blobs import blob_digest, check_digest
from ..errors import SessionNotFound
from .sessions import fsync_dir

BLOBS_DIR: Final = "blobs"


def put_blob(session_dir: Path, data: bytes) -> str:
    """Keep `data` in the session's blobs directory (made when missing); its digest."""
    sha256 = blob_digest(data)
    if not session_dir.is_dir():
        raise SessionNotFound(f"unknown session {session_dir.name!r}")
    directory = session_dir / BLOBS_DIR
    path = directory / sha256
    if path.is_file():
        return sha256  # the same digest: the same bytes, kept already
    made = not directory.is_dir()
    directory.mkdir(exist_ok=True)
    temporary = directory / f".{sha256}.{os.getpid()}.new"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise
    fsync_dir(directory)
    if made:
        fsync_dir(session_dir)
    return sha256


def get_blob(session_dir: Path, sha256: str) -> bytes | None:
    """The bytes kept under `sha256`, or None."""
    try:
        return (session_dir / BLOBS_DIR / check_digest(sha256)).read_bytes()
    except FileNotFoundError:
        return None


def blob_digests(session_dir: Path) -> list[str]:
    """The digests of the session's blobs, sorted (temporary files left by a crash are not)."""
    try:
        names = os.listdir(session_dir / BLOBS_DIR)
    except FileNotFoundError:
        return []
    return sorted(name for name in names if not name.startswith("."))
