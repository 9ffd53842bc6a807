"""Every API key within a command's reach, gathered for the scrub of tool results (SPEC 4.4: a
key never appears in a log or on the wire).

The loop scrubs the key of the server's own provider (`KeyHolder`), but a command is not
confined as the file tools are: it can print the stored credentials file, which holds the keys
of every provider and API root, or a program can read a key from wherever the server's
environment still has one. `HeldKeys` is what else the loop scrubs: every key the stored file
holds (whatever its permissions or form: the scrub is no check of the file) and the value of
every provider key variable set in the server's environment now.

The file is read again only when its identity, size or times change, so a tool result costs one
`stat`, done off the event loop. Values shorter than `MIN_SCRUBBED` characters are not
scrubbed: no real key is that short, and replacing a common word in every result would garble
them. The keys are held as `Secret`s, never logged.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import anyio

from .credentials import MAX_FILE_BYTES
from .secret import Secret

MIN_SCRUBBED: Final = 8
"""The shortest value scrubbed from tool results as a key."""

_Stamp = tuple[int, int, int, int, int]


class HeldKeys:
    """The keys stored at `path` and those in the variables `variables` of `os.environ`."""

    def __init__(self, path: Path, variables: frozenset[str]) -> None:
        self.path = path
        self.variables = variables
        self._cache: tuple[_Stamp | None, tuple[Secret, ...]] = (None, ())
        """The file's stamp when last read, and the keys it held: one value, so that calls in
        two threads at once never pair one read's stamp with another's keys."""

    def __repr__(self) -> str:
        return f"HeldKeys({str(self.path)!r})"

    async def secrets(self) -> tuple[Secret, ...]:
        """Every key held now, none shorter than `MIN_SCRUBBED`, each once."""
        return await anyio.to_thread.run_sync(self.secrets_now)

    def secrets_now(self) -> tuple[Secret, ...]:
        """`secrets`, blocking: the file is read if it changed since the last call."""
        found = [*self._stored_now(), *(os.environ.get(name, "") for name in self.variables)]
        values = sorted({v for v in found if len(v) >= MIN_SCRUBBED}, key=lambda v: (-len(v), v))
        return tuple(Secret(value) for value in values)

    def _stored_now(self) -> Iterator[str]:
        try:
            info = os.stat(self.path)
        except OSError:
            self._cache = (None, ())
            return iter(())
        stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        known, stored = self._cache
        if stamp != known:
            # The stamp is taken before the read: a change during it is read at the next call.
            stored = tuple(Secret(v) for v in stored_values(_read(self.path)))
            self._cache = (stamp, stored)
        return (secret.reveal() for secret in stored)


@functools.cache
def held_keys(path: Path, variables: frozenset[str]) -> HeldKeys:
    """The one `HeldKeys` of `path` and `variables`, so that every turn shares its cache."""
    return HeldKeys(path, variables)


def stored_values(raw: bytes | None) -> list[str]:
    """Every string held as an `"apiKey"` anywhere in the decoded file, each also as
    the file spells it where JSON escapes it (a command prints the file's bytes); none when it
    is no JSON (then it holds no key that `login` wrote)."""
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):  # a command may write anything there
        return []
    values: list[str] = []
    for key in _api_keys(value):
        values.append(key)
        spelled = json.dumps(key)[1:-1]
        if spelled != key:
            values.append(spelled)
    return values


def _api_keys(value: Any) -> list[str]:
    """The strings under `"apiKey"` in `value`, however deep (walked without recursion)."""
    found: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            for name, inner in item.items():
                if name == "apiKey" and isinstance(inner, str):
                    found.append(inner)
                else:
                    pending.append(inner)
        elif isinstance(item, list):
            pending.extend(item)
    return found


def _read(path: Path) -> bytes | None:
    """The file's first bytes, or None: not a regular file, or unreadable. Never waits on a
    FIFO; a symlink is followed (a command's `cat` would follow it too)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        try:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None
            return file.read(MAX_FILE_BYTES)
        except OSError:
            return None


__all__ = ["MIN_SCRUBBED", "HeldKeys", "held_keys", "stored_values"]
