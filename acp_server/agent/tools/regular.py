"""Reading one regular file whole, bounded, as the tree tools read what a repository controls.

A file in the user's repository may be anything: a symlink to `/dev/zero` or out of the session's
directories, a FIFO nobody writes to, a file of many gigabytes. So a file read here is opened
without following a symlink (`O_NOFOLLOW`) and without waiting for a FIFO's writer
(`O_NONBLOCK`), taken only when the open descriptor is a regular file, and read only up to a
cap. Blocking: callers run it in worker threads.
"""

from __future__ import annotations

import os
import stat
from typing import Final

READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_CHUNK: Final = 1 << 20


def read_capped(fd: int, size: int, cap: int) -> bytes | int:
    """The bytes of the regular file open as `fd` (whose `fstat` said `size`), or its size when
    that is over `cap` (then nothing more is read). `OSError` propagates."""
    if size > cap:
        return size
    # One read is usually the whole file: asking for a byte more than its size shows EOF
    # without a second system call.
    first = os.read(fd, size + 1)
    if len(first) == size:
        return first
    chunks = [first]
    total = len(first)
    while chunk := os.read(fd, _CHUNK):
        total += len(chunk)
        if total > cap:  # it grew since the fstat
            return total
        chunks.append(chunk)
    return b"".join(chunks)


def read_regular(name: str, cap: int, *, dir_fd: int | None = None) -> bytes | int | None:
    """The bytes of the regular file `name` (relative to `dir_fd` when given); its size when
    that is over `cap` (unread); None when it is missing, unreadable, a symlink, or not a
    regular file (a FIFO, a device, a directory)."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None
    return read_open_regular(fd, cap)


def read_open_regular(fd: int, cap: int) -> bytes | int | None:
    """`read_regular` of a file already open as `fd`, which this closes."""
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            return None
        return read_capped(fd, status.st_size, cap)
    except OSError:
        return None
    finally:
        os.close(fd)
