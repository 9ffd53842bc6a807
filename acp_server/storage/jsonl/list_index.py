"""The list index of a JSONL sessions root: what `session/list` orders and filters by, for
every session, in one file (`.list-index.jsonl` in the root), so that a page opens only its
own sessions' logs.

Each line is one change: a session `created` (its id, createdAt, cwd as `listed_cwd` makes it,
whether it is a subagent's, whether it is archived), `archived` (its archive state changed),
`deleted`; the first line says the file was `rebuilt` from the logs. The store appends a line
after each change it makes (`O_APPEND`, one write, under a shared `flock`); a rebuild holds the
lock exclusively and rewrites the file in place (a rename would change the root it describes).

The file is a cache and repairs itself. A change to the root's entries (a session made or
removed by anything) changes the root's stamp (its mtime and link count): each `created` and
`deleted` line records the stamp its change left, and a rebuild the stamp it started from. The
index is current when the root's stamp is one it recorded; otherwise (a session made by
another build or by hand, a process that died between its change and its line, a torn or
foreign line, no file at all) it is rebuilt from the logs' headers before it is read. An
archive state found to differ from the log's when a page reads it is corrected with a line.

A process keeps the index it read and reads only what was appended since (`ListIndex.entries`).
"""

from __future__ import annotations

import fcntl
import heapq
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Final

import msgspec

from ...core.header import SessionHeader
from ..api import ArchiveFilter, ListPosition, archive_keeps, listed_cwd

log = logging.getLogger(__name__)

INDEX_NAME: Final = ".list-index.jsonl"

Stamp = tuple[int, int]
"""A directory's (mtime in ns, link count): changed by every entry made or removed in it."""


class Created(msgspec.Struct, frozen=True, array_like=True, tag="created"):
    id: str
    created_at: int
    cwd: str
    subagent: bool
    archived: bool
    stamp: Stamp | None = None

    @property
    def position(self) -> ListPosition:
        return self.created_at, self.id


class Archived(msgspec.Struct, frozen=True, array_like=True, tag="archived"):
    id: str
    archived: bool


class Deleted(msgspec.Struct, frozen=True, array_like=True, tag="deleted"):
    id: str
    stamp: Stamp | None = None


class Rebuilt(msgspec.Struct, frozen=True, array_like=True, tag="rebuilt"):
    token: str
    stamp: Stamp


Line = Created | Archived | Deleted | Rebuilt

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Line)


def created_line(header: SessionHeader, archived: bool, stamp: Stamp | None = None) -> Created:
    """A session's `created` line, from its header."""
    return Created(
        header.id,
        header.created_at,
        listed_cwd(header.cwd),
        header.origin == "subagent",
        archived,
        stamp,
    )


def root_stamp(root: Path) -> Stamp:
    status = os.stat(root)
    return status.st_mtime_ns, status.st_nlink


class _Stale(Exception):
    """The index does not describe the root as it is."""


class IndexState:
    """An index as read: the sessions by id and the stamps its lines recorded."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.sessions: dict[str, Created] = {}
        self.stamps: set[Stamp] = set()
        self.size = 0
        """Bytes of the file read (complete lines only)."""

    def apply(self, lines: Iterable[Line]) -> None:
        for line in lines:
            if isinstance(line, Created):
                self.sessions[line.id] = line
            elif isinstance(line, Archived):
                known = self.sessions.get(line.id)
                if known is not None:
                    self.sessions[line.id] = msgspec.structs.replace(known, archived=line.archived)
            elif isinstance(line, Deleted):
                self.sessions.pop(line.id, None)
            else:
                raise _Stale("a second rebuilt line")
            stamp = getattr(line, "stamp", None)
            if stamp is not None:
                self.stamps.add(stamp)


def page_candidates(
    sessions: Iterable[Created],
    cwd: str | None,
    after: ListPosition | None,
    archived: ArchiveFilter,
    count: int,
) -> list[Created]:
    """The first `count` sessions of a list page, newest first, by what the index knows."""
    wanted = listed_cwd(cwd) if cwd is not None else None
    kept = (
        s
        for s in sessions
        if not s.subagent
        and (wanted is None or s.cwd == wanted)
        and (after is None or s.position < after)
        and archive_keeps(archived, s.archived)
    )
    return heapq.nlargest(count, kept, key=lambda s: s.position)


class ListIndex:
    """The list index of one sessions root; `scan` makes the `created` line of every session
    the root holds (for a rebuild)."""

    def __init__(self, root: Path, scan: Callable[[], Iterator[Created]]) -> None:
        self.root = root
        self.path = root / INDEX_NAME
        self.scan = scan
        self._state: IndexState | None = None
        self._lock = threading.Lock()

    # -- appending (every change the store makes) -----------------------------------------------

    def created(self, header: SessionHeader, archived: bool = False) -> None:
        self._append(created_line(header, archived, self._stamp()))

    def deleted(self, session_id: str) -> None:
        self._append(Deleted(session_id, self._stamp()))

    def archived(self, session_id: str, archived: bool) -> None:
        self._append(Archived(session_id, archived))

    def _stamp(self) -> Stamp | None:
        try:
            return root_stamp(self.root)
        except OSError:
            return None

    def _append(self, line: Line) -> None:
        """One line, written whole by one `write`; none when there is no index (whoever reads
        next builds it) or it cannot be written (it is a cache: the next read repairs it)."""
        data = _encoder.encode(line) + b"\n"
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            os.write(fd, data)
        except OSError as exc:
            log.debug("%s: not appended: %s", self.path, exc)
        finally:
            os.close(fd)

    # -- reading ------------------------------------------------------------------------------

    def candidates(
        self, cwd: str | None, after: ListPosition | None, archived: ArchiveFilter, count: int
    ) -> list[Created]:
        """`page_candidates` over the index, current with the root (rebuilt first if it was
        not)."""
        with self._lock:
            return page_candidates(self._current().values(), cwd, after, archived, count)

    def entries(self) -> dict[str, Created]:
        """Every session as the index has it, current with the root: a copy."""
        with self._lock:
            return dict(self._current())

    def _current(self) -> dict[str, Created]:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                state = self._fresh(fd)
            except (_Stale, msgspec.DecodeError, msgspec.ValidationError) as why:
                # Not atomic (flock drops the shared lock first): another process may have
                # rebuilt it meanwhile, and then it is read rather than built again.
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    state = self._fresh(fd)
                except (_Stale, msgspec.DecodeError, msgspec.ValidationError):
                    log.info("%s: rebuilding the list index: %s", self.path, why)
                    state = self._rebuild(fd)
            self._state = state
            return state.sessions
        finally:
            os.close(fd)  # releases the lock

    def _fresh(self, fd: int) -> IndexState:
        state = self._read(fd, self._state)
        if root_stamp(self.root) not in state.stamps:
            raise _Stale("the sessions directory changed since the index recorded it")
        return state

    def _read(self, fd: int, known: IndexState | None) -> IndexState:
        """The index from `known` on (what this process read before), or from the start when
        the file was rebuilt since."""
        size = os.fstat(fd).st_size
        first = _first_line(fd)
        if first is None:
            raise _Stale("no index yet" if size == 0 else "its first line is not whole")
        rebuilt = _decoder.decode(first)
        if not isinstance(rebuilt, Rebuilt):
            raise _Stale("its first line is not a rebuild's")
        if known is None or known.token != rebuilt.token or size < known.size:
            known = IndexState(rebuilt.token)
            known.stamps.add(rebuilt.stamp)
            known.size = len(first) + 1
        data = os.pread(fd, size - known.size, known.size)
        whole = data.rfind(b"\n") + 1  # a line being appended is read next time
        if whole:
            known.apply(_decoder.decode_lines(data[:whole]))
            known.size += whole
        return known

    def _rebuild(self, fd: int) -> IndexState:
        """Rewrite the index from the logs, under the exclusive lock: a change made during the
        scan appends its line once the lock is released (and a stamp left by something that
        appends nothing makes the next read rebuild again)."""
        stamp = root_stamp(self.root)
        state = IndexState(uuid.uuid4().hex)
        state.stamps.add(stamp)
        lines: list[bytes] = [_encoder.encode(Rebuilt(state.token, stamp))]
        for line in self.scan():
            state.sessions[line.id] = line
            lines.append(_encoder.encode(line))
        data = b"\n".join(lines) + b"\n"
        os.ftruncate(fd, 0)
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        state.size = len(data)
        return state

    def correct(self, session_id: str, archived: bool) -> None:
        """The log says the session's archive state is `archived`, the index did not."""
        self.archived(session_id, archived)
        with self._lock:
            state = self._state
            known = state.sessions.get(session_id) if state is not None else None
            if state is not None and known is not None:
                state.sessions[session_id] = msgspec.structs.replace(known, archived=archived)


def _first_line(fd: int) -> bytes | None:
    """The file's first line, without its newline; None while it has no complete one."""
    block = os.pread(fd, 4096, 0)
    newline = block.find(b"\n")
    return block[:newline] if newline >= 0 else None
