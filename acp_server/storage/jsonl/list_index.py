"""The list index of a JSONL sessions root: what `session/list` orders and filters by, for
every session, in one file (`.list-index.jsonl` in the root), so that a page opens only its
own sessions' logs, and reads only the end of the index.

Each line is one change: a session `created` (its id, createdAt, cwd as `listed_cwd` makes it,
whether it is a subagent's, whether it is archived), `archived` (its archive state changed),
`deleted`; the first line says the file was `rebuilt` from the logs (the sessions then follow
oldest first). Every line also carries the root's `stamp` when it was written (the root
directory's mtime and link count, which every session made or removed changes) and `top`, the
newest position (createdAt, id) of any `created` line up to it.

A page reads the index backwards from its end (`read_back`): the last line about a session
decides it (a `deleted` one drops it; `archived` lines after its `created` one set its state),
and the reading stops as soon as the page's candidates are all newer than the `top` of the line
before: no line further back can hold a newer one. Sessions are mostly created in order, so the
first page of 100,000 sessions reads about a hundred lines.

The store appends a line for each change it makes, under an exclusive `flock` of the index held
across the change itself (a session's directory made or removed, and its line appended with the
stamp the change left); a page reads under a shared lock. The file is a cache and repairs
itself: the index is current when its last line's stamp is the root's stamp now. Otherwise (a
session made or removed by another build or by hand, a process that died between its change and
its line), or when the index is missing or a line cannot be read, it is rebuilt from the logs'
headers before it is read, in place under the exclusive lock (a rename would itself change the
root). An archive state found to differ from the log's when a page reads the log is corrected
with a line.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import logging
import os
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

READ_BACK_BLOCK: Final = 64 * 1024


class Created(msgspec.Struct, frozen=True, array_like=True, tag="created"):
    id: str
    created_at: int
    cwd: str
    subagent: bool
    archived: bool
    stamp: Stamp | None = None
    top: ListPosition | None = None

    @property
    def position(self) -> ListPosition:
        return self.created_at, self.id


class Archived(msgspec.Struct, frozen=True, array_like=True, tag="archived"):
    id: str
    archived: bool
    stamp: Stamp | None = None
    top: ListPosition | None = None


class Deleted(msgspec.Struct, frozen=True, array_like=True, tag="deleted"):
    id: str
    stamp: Stamp | None = None
    top: ListPosition | None = None


class Rebuilt(msgspec.Struct, frozen=True, array_like=True, tag="rebuilt"):
    stamp: Stamp | None = None
    top: ListPosition | None = None


Line = Created | Archived | Deleted | Rebuilt

_encoder: Final = msgspec.json.Encoder()
_decoder: Final = msgspec.json.Decoder(Line)


def created_line(header: SessionHeader, archived: bool) -> Created:
    """A session's `created` line, from its header (its stamp and top are set when written)."""
    return Created(
        header.id, header.created_at, listed_cwd(header.cwd), header.origin == "subagent", archived
    )


def root_stamp(root: Path) -> Stamp:
    status = os.stat(root)
    return status.st_mtime_ns, status.st_nlink


class StaleIndex(Exception):
    """The index does not describe the root as it is (or cannot be read)."""


def read_back(
    lines: Iterable[Line],
    cwd: str | None,
    after: ListPosition | None,
    archived: ArchiveFilter,
    count: int,
) -> list[Created]:
    """The first `count` sessions of a list page, newest first, from the index's lines given
    last first; only as many lines are taken as the page needs."""
    wanted = listed_cwd(cwd) if cwd is not None else None
    decided: set[str] = set()
    states: dict[str, bool] = {}
    """Archive states set after a session's `created` line (the latest, read first)."""
    kept: list[Created] = []
    """The page's candidates so far, oldest first."""
    for line in lines:
        if len(kept) >= count and (line.top is None or line.top < kept[0].position):
            break  # every line from here back holds older sessions only
        if isinstance(line, Archived):
            states.setdefault(line.id, line.archived)
        elif isinstance(line, Deleted):
            decided.add(line.id)
        elif isinstance(line, Created) and line.id not in decided:
            decided.add(line.id)
            state = states.get(line.id, line.archived)
            if (
                not line.subagent
                and (wanted is None or line.cwd == wanted)
                and (after is None or line.position < after)
                and archive_keeps(archived, state)
            ):
                if len(kept) >= count and line.position < kept[0].position:
                    continue
                if state != line.archived:
                    line = msgspec.structs.replace(line, archived=state)
                bisect.insort(kept, line, key=_position)
                if len(kept) > count:
                    del kept[0]
    return kept[::-1]


def _position(line: Created) -> ListPosition:
    return line.position


class ListIndex:
    """The list index of one sessions root; `scan` makes the `created` line of every session
    the root holds (for a rebuild)."""

    def __init__(self, root: Path, scan: Callable[[], Iterator[Created]]) -> None:
        self.root = root
        self.path = root / INDEX_NAME
        self.scan = scan

    # -- changes (each one the store makes) ------------------------------------------------------

    @contextlib.contextmanager
    def change(self) -> Iterator[Callable[[Line], None]]:
        """Hold the index while the root changes: what the block makes or removes is recorded
        by the lines it appends (through the function it is given), each with the stamp the
        change left, before anyone reads the index. No index yet: nothing is held or kept
        (whoever reads next builds it)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError:
            fd = -1
        if fd < 0:
            yield lambda line: None
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield lambda line: self._append(fd, line)
        finally:
            os.close(fd)

    def _append(self, fd: int, line: Line) -> None:
        """One line, written whole by one `write`. An index whose last line cannot be read is
        removed instead: the next read rebuilds it."""
        try:
            last = _last_line(fd, os.fstat(fd).st_size)
            if last is None:
                return  # made by a reader that is about to build it: it will see the change
            top = last.top
            if isinstance(line, Created) and (top is None or line.position > top):
                top = line.position
            stamped = msgspec.structs.replace(line, stamp=root_stamp(self.root), top=top)
            os.write(fd, _encoder.encode(stamped) + b"\n")
        except (StaleIndex, msgspec.DecodeError, msgspec.ValidationError):
            with contextlib.suppress(OSError):
                self.path.unlink()
        except OSError as exc:
            log.debug("%s: not appended: %s", self.path, exc)

    def archived(self, session_id: str, archived: bool) -> None:
        with self.change() as record:
            record(Archived(session_id, archived))

    # -- reading ------------------------------------------------------------------------------

    def candidates(
        self, cwd: str | None, after: ListPosition | None, archived: ArchiveFilter, count: int
    ) -> list[Created]:
        """`read_back` over the index, current with the root (rebuilt first if it was not)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            # No root yet, or one this process may not write: read every header instead.
            log.debug("%s: cannot be opened: %s", self.path, exc)
            newest_last = sorted(self.scan(), key=_position)
            lines = [msgspec.structs.replace(line, top=line.position) for line in newest_last]
            return read_back(reversed(lines), cwd, after, archived, count)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                return self._read(fd, cwd, after, archived, count)
            except (StaleIndex, msgspec.DecodeError, msgspec.ValidationError) as why:
                # Not atomic (flock drops the shared lock first): another process may have
                # rebuilt it meanwhile, and then it is read rather than built again.
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    return self._read(fd, cwd, after, archived, count)
                except (StaleIndex, msgspec.DecodeError, msgspec.ValidationError):
                    log.info("%s: rebuilding the list index: %s", self.path, why)
                    self._rebuild(fd)
                # A session made during the rebuild changes the root again: the index just
                # built is still the root as the rebuild scanned it, so it is read as it is.
                return self._read(fd, cwd, after, archived, count, current=False)
        finally:
            os.close(fd)  # releases the lock

    def _read(
        self,
        fd: int,
        cwd: str | None,
        after: ListPosition | None,
        archived: ArchiveFilter,
        count: int,
        *,
        current: bool = True,
    ) -> list[Created]:
        """The index's page; `StaleIndex` if there is none, or (`current`) if the root has
        changed since the index recorded it."""
        size = os.fstat(fd).st_size
        last = _last_line(fd, size)
        if last is None:
            raise StaleIndex("no index yet")
        if current and last.stamp != root_stamp(self.root):
            raise StaleIndex("the sessions directory changed since the index recorded it")
        return read_back(_lines_back(fd, size), cwd, after, archived, count)

    def _rebuild(self, fd: int) -> None:
        """Rewrite the index from the logs, oldest session first, under the exclusive lock."""
        stamp = root_stamp(self.root)
        sessions = sorted(self.scan(), key=lambda line: line.position)
        top = sessions[-1].position if sessions else None
        lines = [_encoder.encode(Rebuilt(stamp, None))]
        lines += [
            _encoder.encode(msgspec.structs.replace(line, stamp=stamp, top=line.position))
            for line in sessions
        ]
        if sessions:  # the last line's stamp is what a read checks: the rebuild's
            lines.append(_encoder.encode(Rebuilt(stamp, top)))
        data = b"\n".join(lines) + b"\n"
        os.ftruncate(fd, 0)
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)


def _last_line(fd: int, size: int) -> Line | None:
    """The index's last line; None for an empty file, `StaleIndex` for a torn one."""
    if size == 0:
        return None
    return next(_lines_back(fd, size), None)


def _lines_back(fd: int, size: int) -> Iterator[Line]:
    """The index's lines, last first, read (and decoded) a block at a time from its end."""
    end = size
    rest = b""
    if os.pread(fd, 1, size - 1) != b"\n":
        raise StaleIndex("its last line is not whole")
    while end > 0:
        start = max(0, end - READ_BACK_BLOCK)
        block = os.pread(fd, end - start, start) + rest
        end = start
        if start > 0:  # the block's first line may begin in the block before
            newline = block.find(b"\n")
            if newline < 0:
                rest = block
                continue
            rest, block = block[:newline], block[newline + 1 :]
        else:
            rest = b""
        yield from reversed(_decoder.decode_lines(block))
