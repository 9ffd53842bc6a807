"""The API key: a value that never shows itself, and its way out of the process environment.

Removing a variable from `os.environ` does not remove it from `/proc/<pid>/environ`, which
shows the environment the process was started with, and which any program the server runs
(`run_command`) can read from its parent. So when `acp-server serve` finds a key in its
environment (its provider's or any other's), it starts itself again, same interpreter and
arguments, with an environment without any (`reexec_without`), and hands its own provider's
key over through a pipe: the new process reads it once and closes the pipe
(`take_handed_over`). Only the pipe's file descriptor number
goes through the environment, and it is removed from `os.environ` once read, so the programs
the server runs inherit neither the key, nor the variable, nor the descriptor.

Only this module's names are imported by the command line before it knows it needs them: it
loads nothing heavy.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Collection, Sequence
from typing import Final, NoReturn

KEY_FD_ENV: Final = "ACP_SERVER_API_KEY_FD"
"""Set by `reexec_without` only: the inherited descriptor the key is to be read from."""
MAX_KEY_BYTES: Final = 32 * 1024
"""A longer key is refused: the whole key is written into the pipe before the process starts
again, so it must fit in the pipe's buffer (64 KiB on Linux; keys are some tens of bytes)."""


class SecretError(Exception):
    """The key cannot be handed over or taken (too long, a bad descriptor)."""


class Secret:
    """A string that never shows itself in a repr, a log line or a traceback's locals."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str, replacement: str = "[redacted]") -> str:
        """`text` with every occurrence of the value replaced."""
        return text.replace(self._value, replacement) if self._value in text else text

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__


def can_reexec() -> bool:
    """Whether this platform has `/proc`-style environments worth scrubbing and `execv`."""
    return os.name == "posix" and bool(sys.orig_argv)


def reexec_without(name: str | None, dropped: Collection[str] = ()) -> NoReturn:
    """Run this same command again without `$name` in its environment, the value of which goes
    to the new process through an inherited pipe, and without the variables `dropped` (other
    providers' keys, which this process does not use). Does not return (or raises
    `SecretError`)."""
    value = os.fsencode(os.environ.get(name, "")) if name is not None else b""
    if len(value) > MAX_KEY_BYTES:
        raise SecretError(f"${name} is longer than {MAX_KEY_BYTES} bytes")
    environ = {k: v for k, v in os.environ.items() if k != name and k not in dropped}
    read_end = None
    if value:
        read_end, write_end = os.pipe()
        try:
            written = 0
            while written < len(value):
                written += os.write(write_end, value[written:])
        finally:
            os.close(write_end)
        os.set_inheritable(read_end, True)
        environ[KEY_FD_ENV] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, environ)
    except OSError as exc:
        if read_end is not None:
            os.close(read_end)
        raise SecretError(f"cannot start {sys.executable} again: {exc.strerror or exc}") from None


def take_handed_over() -> Secret | None:
    """The key `reexec_without` handed to this process, read once, its descriptor closed and
    its variable removed; None if none was handed over (or it was empty)."""
    raw = os.environ.pop(KEY_FD_ENV, None)
    if raw is None:
        return None
    try:
        fd = int(raw)
    except ValueError:
        raise SecretError(f"${KEY_FD_ENV} is not a file descriptor: {raw!r}") from None
    try:
        if fd <= 2 or not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise SecretError(f"${KEY_FD_ENV}: descriptor {fd} is not the key's pipe")
        chunks: list[bytes] = []
        while piece := os.read(fd, MAX_KEY_BYTES + 1):
            chunks.append(piece)
        os.close(fd)
    except OSError as exc:
        raise SecretError(f"cannot read the API key from descriptor {fd}: {exc.strerror}") from None
    value = os.fsdecode(b"".join(chunks))
    return Secret(value) if value else None


KeySource = Callable[[str], Secret | None]
"""One place a provider's key may be found, given the name of its environment variable; None:
not there. `find_key` asks each source of `KEY_SOURCES` in turn; stored credentials are one
more source of this shape."""


def handed_over_key(env_name: str) -> Secret | None:
    """The key `reexec_without` handed to this process (`$env_name` is dropped if set again)."""
    key = take_handed_over()
    if key is not None:
        os.environ.pop(env_name, None)
    return key


def environment_key(env_name: str) -> Secret | None:
    """`$env_name`, taken out of `os.environ` so that the programs the server runs do not
    inherit it (`reexec_without` also takes it out of `/proc/<pid>/environ`)."""
    value = os.environ.pop(env_name, "")
    return Secret(value) if value else None


KEY_SOURCES: list[KeySource] = [handed_over_key, environment_key]


def find_key(env_name: str, sources: Sequence[KeySource] | None = None) -> Secret | None:
    """The first key a source finds (default: `KEY_SOURCES`), or None."""
    for source in KEY_SOURCES if sources is None else sources:
        key = source(env_name)
        if key is not None:
            return key
    return None


__all__ = [
    "KEY_FD_ENV",
    "KEY_SOURCES",
    "KeySource",
    "Secret",
    "SecretError",
    "can_reexec",
    "environment_key",
    "find_key",
    "handed_over_key",
    "reexec_without",
    "take_handed_over",
]
