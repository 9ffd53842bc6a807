"""A local command's whole process tree, found and killed (SPEC 4.3: killed at the timeout).

Killing the command's process group is not enough: a descendant that calls `setsid()` (or
`setpgid()`) leaves the group, and one whose parent exits is reparented to init, out of the
tree. So a command carries a mark, `$ACP_SERVER_COMMAND`, a token of its own in its
environment, which its descendants inherit; its tree is every process below its root (parent
links read from `/proc`, whatever session or group they moved to) and every process whose
environment still holds the mark (those that lost their parent).

The tree is frozen before it is killed: each process found is stopped (`SIGSTOP`), and `/proc`
is read again until no new member shows up, so none can fork a child the kill misses; then all
are killed (`SIGKILL` ends a stopped process too). Without `/proc` (not Linux), the process
group is all that can be killed.

A cgroup would be airtight (a descendant that clears its environment after its parent died
escapes both links), but the server cannot count on a writable cgroup v2 hierarchy. Making the
server a child subreaper (`PR_SET_CHILD_SUBREAPER`) would bring such orphans back below the
server, but not below their command: among the server's own children (its MCP servers, other
sessions' commands) nothing but the mark tells them apart, and the server would have to reap
them.

Blocking (it reads `/proc`): callers run it in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from collections.abc import Iterator
from typing import Final

MARK_ENV: Final = "ACP_SERVER_COMMAND"
"""The variable that marks a command's processes; its value is the command's own token."""
MAX_ROUNDS: Final = 1000
"""The most times `/proc` is read while freezing one tree: a bound on a fork bomb's race."""
_PROC: Final = "/proc"


def new_mark() -> str:
    """A token no other command shares."""
    return secrets.token_hex(16)


def _pids() -> Iterator[int]:
    with contextlib.suppress(OSError):
        for name in os.listdir(_PROC):
            if name.isdigit():
                yield int(name)


def _parent(pid: int) -> int | None:
    """The parent of `pid`, or None when it is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    # The command name (in parentheses) may hold spaces and parentheses: split after the last.
    fields = stat.rsplit(b")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else None


def _marked(pid: int, entry: bytes) -> bool:
    """Whether `pid`'s environment holds `entry` (`NAME=token`)."""
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as file:
            environ = file.read()
    except OSError:  # gone, or not ours to read: not one of the command's
        return False
    return entry in environ.split(b"\0")


def members(root: int | None, mark: str) -> set[int]:
    """The processes of the command started as `root` with `mark`: `root` itself, its
    descendants, and every process that carries the mark (and their descendants). `root` is
    None once it was reaped: its pid may then be another process's."""
    entry = f"{MARK_ENV}={mark}".encode()
    me = os.getpid()
    children: dict[int, list[int]] = {}
    found: set[int] = set()
    for pid in _pids():
        if pid == me:
            continue
        parent = _parent(pid)
        if parent is not None:
            children.setdefault(parent, []).append(pid)
        if _marked(pid, entry):
            found.add(pid)
    if root is not None:
        found.add(root)
    pending = list(found)
    while pending:
        for child in children.get(pending.pop(), ()):
            if child not in found:
                found.add(child)
                pending.append(child)
    return found


def _signal(pid: int, number: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone (or reused: not ours)
        os.kill(pid, number)


def kill_tree(root: int | None, mark: str) -> None:
    """Stop every process of the command, until no new one appears; then kill them all (and
    the group `root` leads, which is all there is to kill without `/proc`). `root` is None
    once it was reaped (see `members`)."""
    stopped: set[int] = set()
    if os.path.isdir(f"{_PROC}/self"):
        for _ in range(MAX_ROUNDS):
            fresh = members(root, mark) - stopped
            if not fresh:
                break
            for pid in fresh:
                _signal(pid, signal.SIGSTOP)
            stopped |= fresh
    if root is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, signal.SIGKILL)  # the command leads its own group
    for pid in stopped:
        _signal(pid, signal.SIGKILL)
