"""The file side of `/rewind`: what a file holds now (its digest), and putting back what it
held (or removing it), on the server's own file system, beneath the session's directories.

Every open goes through `confinement.open_local` (via `tools.files.open_regular`), as the file
tools' do: a path that leads out of the session's directories, or into the stored credentials'
directory, is refused, and only regular files are read, written or removed. Blocking: called in
worker threads.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from .confinement import Directories, PathRefused, SessionRoots, local_roots, open_local
from .tools.base import ToolError
from .tools.files import open_regular, write_all

UNREADABLE: Final = "unreadable"
"""The digest of a file that cannot be read now: it matches no content, so the file counts as
changed outside the agent (left alone unless the user allows it)."""

_READ_BLOCK: Final = 1 << 20


def current_digests(paths: Sequence[str], roots: Directories) -> dict[str, str | None]:
    """Each file's digest now: None when it does not exist, `UNREADABLE` when it cannot be
    read (not a regular file, outside the directories, an I/O error)."""
    digests: dict[str, str | None] = {}
    with local_roots(*roots) as opened:
        for path in paths:
            try:
                fd, _, _ = open_regular(opened, path, roots[0], os.O_RDONLY)
            except FileNotFoundError:
                digests[path] = None
                continue
            except (OSError, PathRefused, ToolError):
                digests[path] = UNREADABLE
                continue
            try:
                digests[path] = _digest_of(fd)
            except OSError:
                digests[path] = UNREADABLE
            finally:
                os.close(fd)
    return digests


def _digest_of(fd: int) -> str:
    digest = hashlib.sha256()
    while block := os.read(fd, _READ_BLOCK):
        digest.update(block)
    return digest.hexdigest()


def restore_file(path: str, content: bytes | None, roots: Directories) -> None:
    """Make the file `path` hold `content` (created with its missing parents), or remove it
    when `content` is None (an absent file stays absent). `OSError`, `PathRefused` or
    `ToolError` (not a regular file)."""
    with local_roots(*roots) as opened:
        if content is None:
            _remove(opened, path, roots[0])
            return
        fd, _, _ = open_regular(opened, path, roots[0], os.O_WRONLY, create=True)
        try:
            write_all(fd, content)
            os.fsync(fd)
        finally:
            os.close(fd)


def _remove(opened: SessionRoots, path: str, cwd: Path) -> None:
    """Unlink the regular file `path` through its directory, opened beneath the roots."""
    parent, name = os.path.split(os.path.join(cwd, path))
    try:
        directory, _ = open_local(opened, parent, cwd, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return
    try:
        try:
            status = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(status.st_mode):
            raise ToolError(f"refused: {path} is no longer a regular file")
        os.unlink(name, dir_fd=directory)
    finally:
        os.close(directory)
