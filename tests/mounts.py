"""File systems that fail on purpose, for tests of storage faults (a test helper).

`tmpfs(path, size)` mounts a small tmpfs on `path` (so a ballast file can fill it: `fill`),
`read_only_bind(path)` makes `path` a read-only view of itself. Both need root (CI runs as
root); where mounting is not permitted the test is skipped, saying so (in CI it fails). Both
unmount on exit.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from unavailable import unavailable

BALLAST_NAME = ".ballast"
"""Not a valid session id, so the server never takes it for a session."""


def _mount(*args: str) -> None:
    if os.geteuid() != 0:
        unavailable("mounting a file system needs root (CI runs these tests as root)")
    result = subprocess.run(["mount", *args], capture_output=True, text=True)
    if result.returncode != 0:
        message = result.stderr.strip()
        if "permission denied" in message.lower() or "not permitted" in message.lower():
            unavailable(f"mounting is not permitted here: {message}")
        raise AssertionError(f"mount {' '.join(args)} failed: {message}")


def _unmount(path: Path) -> None:
    if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` (as mount's `size=` option: "2m") mounted on `path` (created)."""
    path.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    try:
        yield path
    finally:
        _unmount(path)


@contextmanager
def read_only_bind(path: Path) -> Iterator[Path]:
    """`path` (a directory) bind-mounted read-only onto itself."""
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,ro,bind", str(path))
        yield path
    finally:
        _unmount(path)


def fill(directory: Path) -> Path:
    """Write a ballast file into `directory` until its file system is full; returns it."""
    ballast = directory / BALLAST_NAME
    block = b"\xa5" * (64 * 1024)
    with open(ballast, "wb", buffering=0) as file:
        try:
            while True:
                file.write(block)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return ballast
