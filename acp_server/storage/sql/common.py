"""What the SQLite and PostgreSQL engines share: the tables' statements in each one's dialect,
reading a session back and checking it, the history pages, and a writer's queue, commits,
recovery and close (SPEC 2.4 to 2.6).

Both keep the same tables (PostgreSQL's names with `acp_` before them): a session's row holds
its header as written and its stored next seq; each storage record is a row keyed by session
and first seq, its JSON text byte for byte; the message index and the children started beside
them; the chunk checks of its runs of chunk rows (`acp_server.core.chunk_checks`), each written
in the transaction of the batch that ended its run, keyed by session and the run's first line
(the records numbered as a log's lines: the header is line 1, the records in seq order after
it). A continuation trusts a run whose rows match their check instead of decoding them; the
checks are a cache of that work, as beside a JSONL log. An engine brings its connection, its
claim and its driver's errors.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final, Generic, Protocol, TypeVar

import anyio
import msgspec

from ...core.chunk_checks import ChunkCheck, ChunkRuns, KeptRecord
from ...core.chunk_rows import StorageRecord, pack_chunk_runs
from ...core.event_log import EventLog
from ...core.events import SessionEvent, decode_event
from ...core.header import SessionHeader
from ...core.paging import PageCut, clip_records
from ...core.recovery import interrupted_turn_closers
from ...core.tail import PREFIX_TAGS, TailPrefix, TailRead, fold_prefix
from ..api import (
    ArchiveFilter,
    BatchWrites,
    ListedPage,
    ListedSession,
    ListPosition,
    Opened,
    StoredLog,
    listed_cwd,
)
from ..appends import BatchRows, QueuedAppends, batch_rows
from ..checked import CheckedRecords
from ..collection import collection_paused
from ..digest import joined_records
from ..errors import (
    CorruptLog,
    LogError,
    LogWriteFailed,
    SessionNotFound,
    StaleWriter,
    UnsupportedStore,
)
from ..records import parse_header

log = logging.getLogger(__name__)

E = TypeVar("E", bound=Exception)
S = TypeVar("S")

SCHEMA_VERSION: Final = 5
"""Bumped whenever the tables change; a database of another version is refused, except one of
an earlier version, which is upgraded in place a step at a time (`needs_archived_column`,
`needs_blobs_table`, `needs_checks_table`, `needs_list_columns`)."""

ARCHIVED_SINCE: Final = 2
"""The version that added the sessions' `archived` column. A database of the version before
holds no `session/archived` event (the type came with it), so the column's default (not
archived) is exactly right for every session in it: adding the column is the whole upgrade."""


_PREFIX_STARTS: Final = tuple(f'{{"type":"{tag}"' for tag in PREFIX_TAGS)
"""How the body of each event a tail open keeps of before its base begins (the tag first, as
every writer encodes an event)."""
_STEP_START: Final = b'{"type":"step/start"'


def prefix_rows(body: str) -> str:
    """The SQL condition on a record's `body` (as text) that it is an event a tail's prefix
    reads: the predicate of the partial index that finds them, written the same way in the
    query so that the database uses it."""
    return "(" + " OR ".join(f"substr({body}, 1, {len(s)}) = '{s}'" for s in _PREFIX_STARTS) + ")"


def tail_prefix(where: str, bodies: Iterable[bytes]) -> TailPrefix:
    """The prefix (`core.tail`) of the bodies a prefix query read, in seq order."""
    steps = 0
    events = []
    for body in bodies:
        if body.startswith(_STEP_START):
            steps += 1  # thousands of them: counted, not decoded
            continue
        try:
            events.append(decode_event(body))
        except ValueError as exc:
            raise CorruptLog(where, 2, str(exc)) from None
    folded = fold_prefix(TailPrefix(), events)
    return TailPrefix(folded.events, steps, folded.compaction, folded.rewind)


_MARKS: Final = tuple(f'{{"type":"{tag}"' for tag in ("context/compaction", "session/rewind"))


def marks_rows(body: str) -> str:
    """The SQL condition on a record's `body` that it is a `context/compaction` or a
    `session/rewind` (within `prefix_rows`, whose index finds them)."""
    return "(" + " OR ".join(f"substr({body}, 1, {len(s)}) = '{s}'" for s in _MARKS) + ")"


def compacted(latest_mark: bytes | None) -> bool:
    """Whether the latest compaction-or-rewind body read is a compaction (`TailPrefix.compacted`
    of the whole session): without one, a tail load reads the whole session."""
    return latest_mark is not None and latest_mark.startswith(_MARKS[0].encode())


def read_tail(
    end: int,
    max_messages: int,
    page: Callable[[int, int], tuple[PageCut, list[StorageRecord]]],
    between: Callable[[int, int], list[StorageRecord]],
) -> TailRead:
    """A session of `end` seqs read back from the end until its base is found: the page of
    its newest messages first, then further back (`core.tail`)."""
    read = TailRead(end, max_messages)
    if end:
        cut, records = page(end, max_messages)
        read.took(records, cut.start)
    while (wanted := read.wanted()) is not None:
        read.took(between(*wanted), wanted[0])
    return read


class Statements:
    """The statements both engines run, in one engine's dialect: its tables' prefix, its
    parameter marker, and how a JSON column is read as text (`header`) and as bytes (`body`)."""

    def __init__(self, prefix: str, p: str, header: str, body: str, body_text: str) -> None:
        sessions, records = f"{prefix}sessions", f"{prefix}records"
        self.header = f"SELECT {header} FROM {sessions} WHERE id = {p}"
        self.header_and_next_seq = f"SELECT {header}, next_seq FROM {sessions} WHERE id = {p}"
        self.exists = f"SELECT 1 FROM {sessions} WHERE id = {p}"
        self.next_seq = f"SELECT next_seq FROM {sessions} WHERE id = {p}"
        self.listed = f"SELECT id, {header}, title, updated_at, archived FROM {sessions}"
        self.ids = f"SELECT id FROM {sessions} ORDER BY id"
        self.bodies = f"SELECT {body} FROM {records} WHERE session = {p} ORDER BY seq0"
        self.row_count = f"SELECT count(*) FROM {records} WHERE session = {p}"
        self.cuts = (
            f"SELECT cut FROM {prefix}messages WHERE session = {p} AND seq < {p} "
            f"ORDER BY seq DESC LIMIT {p}"
        )
        # From the row holding `lo` (the last starting at or before it) to `hi`: parameters
        # (session, hi, session, lo).
        self.between = (
            f"SELECT {body} FROM {records} WHERE session = {p} AND seq0 < {p} "
            f"AND seq0 >= coalesce((SELECT max(seq0) FROM {records} "
            f"WHERE session = {p} AND seq0 <= {p}), 0) ORDER BY seq0"
        )
        self.has_child = f"SELECT 1 FROM {prefix}children WHERE session = {p} AND child = {p}"
        self.schema_version = f"SELECT value FROM {prefix}store WHERE key = 'schema_version'"
        self.set_schema_version = f"INSERT INTO {prefix}store VALUES ('schema_version', {p})"
        self.upgrade_schema_version = (
            f"UPDATE {prefix}store SET value = {p} WHERE key = 'schema_version' AND value = {p}"
        )
        self.insert_messages = f"INSERT INTO {prefix}messages VALUES ({p}, {p}, {p})"
        self.prefix_index = (
            f"CREATE INDEX IF NOT EXISTS {prefix}records_prefix ON {records} (session, seq0) "
            f"WHERE {prefix_rows(body_text)}"
        )
        self.prefix = (
            f"SELECT {body} FROM {records} WHERE session = {p} AND seq0 < {p} "
            f"AND {prefix_rows(body_text)} ORDER BY seq0"
        )
        self.latest_mark = (
            f"SELECT {body} FROM {records} WHERE session = {p} AND {prefix_rows(body_text)} "
            f"AND {marks_rows(body_text)} ORDER BY seq0 DESC LIMIT 1"
        )
        self.sessions = sessions
        self.p = p
        self.listed_page = (
            f"SELECT id, {header}, title, updated_at, archived, created_at FROM {sessions} "
            "WHERE (origin IS NULL OR origin <> 'subagent')"
        )
        self.list_columns = f"SELECT id, {header} FROM {sessions}"
        self.set_list_columns = f"UPDATE {sessions} SET cwd = {p}, origin = {p} WHERE id = {p}"
        self.list_indexes = [
            f"CREATE INDEX {sessions}_by_created ON {sessions} (created_at DESC, id DESC)",
            f"CREATE INDEX {sessions}_by_cwd ON {sessions} (cwd, created_at DESC, id DESC)",
        ]
        self.checks = f"SELECT line, chunk_check FROM {prefix}checks WHERE session = {p}"
        # A run's check replaces any kept for the same line: one left by a load of rows that
        # were then changed (the new check is of the rows as they are).
        self.keep_check = (
            f"INSERT INTO {prefix}checks VALUES ({p}, {p}, {p}) ON CONFLICT (session, line) "
            "DO UPDATE SET chunk_check = excluded.chunk_check"
        )
        self.drop_check = f"DELETE FROM {prefix}checks WHERE session = {p} AND line = {p}"

    def page(
        self, cwd: str | None, after: ListPosition | None, limit: int, archived: ArchiveFilter
    ) -> tuple[str, list[object]]:
        """`Store.list_page`'s query and parameters: one more row than the page, so that the
        page knows whether a session follows it. Its order and filters are those of the
        indexes `list_indexes` makes: the query reads the page's rows, not the table."""
        p = self.p
        query = [self.listed_page]
        params: list[object] = []
        if cwd is not None:
            query.append(f"AND cwd = {p}")
            params.append(listed_cwd(cwd))
        if after is not None:
            query.append(f"AND (created_at, id) < ({p}, {p})")
            params += [after[0], after[1]]
        if archived == "exclude":
            query.append("AND NOT archived")
        elif archived == "only":
            query.append("AND archived")
        query.append(f"ORDER BY created_at DESC, id DESC LIMIT {p}")
        params.append(limit + 1)
        return " ".join(query), params


BLOBS_SINCE: Final = 3
"""The version that added the `blobs` table (the checkpoints' file contents, by session and
digest). A database of a version before holds no checkpoint: an empty table is exactly right."""


CHECKS_SINCE: Final = 4
"""The version that added the `checks` table (the chunk checks of the sessions' runs of chunk
rows). A database of a version before has none: each run is decoded in full, as before, and a
continuation keeps the checks of the runs it decoded."""


LIST_COLUMNS_SINCE: Final = 5
"""The version that added the sessions' `cwd` (as `listed_cwd` makes it) and `origin` columns
and the indexes a list page reads (`Statements.list_indexes`). The upgrade fills the columns
from each stored header (`list_columns`)."""


def upgrades(found: object) -> bool:
    """Whether a database of schema version `found` is upgraded in place (else: this
    version, or refused)."""
    return isinstance(found, int) and ARCHIVED_SINCE - 1 <= found < SCHEMA_VERSION


def needs_list_columns(found: object) -> bool:
    """Whether a database of schema version `found` is upgraded by adding the list columns."""
    return isinstance(found, int) and ARCHIVED_SINCE - 1 <= found < LIST_COLUMNS_SINCE


def list_columns(header: SessionHeader) -> tuple[str, str | None]:
    """What a session's row keeps of its header for listing: its cwd and its origin."""
    return listed_cwd(header.cwd), header.origin or None


def filled_list_columns(rows: Iterable[tuple[str, str]]) -> list[tuple[str, str | None, str]]:
    """The parameters of `Statements.set_list_columns` for the upgrade, from (id, header)
    rows; a header that cannot be read keeps the defaults (listing it warns, as before)."""
    filled = []
    for session_id, text in rows:
        try:
            header = parse_header(session_id, text.encode())
        except LogError:
            continue
        cwd, origin = list_columns(header)
        filled.append((cwd, origin, session_id))
    return filled


def needs_archived_column(found: object) -> bool:
    """Whether a database of schema version `found` is upgraded by adding `archived`."""
    return found == ARCHIVED_SINCE - 1


def needs_blobs_table(found: object) -> bool:
    """Whether a database of schema version `found` is upgraded by adding the `blobs` table."""
    return isinstance(found, int) and ARCHIVED_SINCE - 1 <= found < BLOBS_SINCE


def needs_checks_table(found: object) -> bool:
    """Whether a database of schema version `found` is upgraded by adding the `checks` table."""
    return isinstance(found, int) and ARCHIVED_SINCE - 1 <= found < CHECKS_SINCE


def version_refused(url: str, found: object) -> UnsupportedStore | None:
    """The refusal of a store whose schema version is not this build's (None: it is)."""
    if found == SCHEMA_VERSION:
        return None
    return UnsupportedStore(
        f"{url}: unsupported store schema version {found!r} "
        f"(this build reads version {SCHEMA_VERSION})"
    )


def stale(where: str, first: int, how: str) -> StaleWriter:
    """A batch from seq `first` that does not follow what is stored."""
    return StaleWriter(where, f"a batch from seq {first} does not follow what is stored ({how})")


def session_header(where: str, session_id: str, text: str) -> SessionHeader:
    """A session's stored header, checked as a log's line 1 is, and against its id."""
    header = parse_header(where, text.encode())
    if header.id != session_id:
        raise CorruptLog(
            where, 1, f"header id {header.id!r} does not match the session {session_id!r}"
        )
    return header


def stored_log(
    where: str, session_id: str, row: tuple[str, int] | None, bodies: list[bytes]
) -> StoredLog:
    """A whole session from its row (header, next seq) and its records' bodies in seq order,
    every record checked as a JSONL reader checks its lines (the header being line 1)."""
    if row is None:
        raise SessionNotFound(f"unknown session {session_id!r}")
    header = session_header(where, session_id, row[0])
    checked = CheckedRecords(where, bodies)
    with collection_paused():
        records = list(checked)
    if checked.event_count != row[1]:
        raise CorruptLog(
            where,
            len(bodies) + 1,
            f"the records hold {checked.event_count} events, the session says {row[1]}",
        )
    return StoredLog(header, records, checked.event_count)


class KeptRows(msgspec.Struct):
    """A session read to be continued (`kept_rows`): as `StoredLog`, but the runs of chunk rows
    that matched their check are kept packed."""

    header: SessionHeader
    records: list[KeptRecord]
    event_count: int
    rows: int
    """The records' rows: the last one is line `rows + 1` (the header is line 1)."""
    used_checks: list[ChunkCheck]
    """The checks that matched."""
    new_checks: list[ChunkCheck]
    """Checks made for the long runs that were decoded: what the table lacked."""
    stale_lines: list[int]
    """The lines of checks kept that matched nothing, and that no new check replaces."""


_check_decoder: Final = msgspec.json.Decoder(ChunkCheck)
_check_encoder: Final = msgspec.json.Encoder()


class KeptChecks(msgspec.Struct):
    """The chunk checks kept for a session (`read_checks`)."""

    checks: dict[int, ChunkCheck]
    """By first line."""
    unreadable: list[int]
    """The lines of rows that hold no check of their line: dropped by the next continuation."""


def read_checks(rows: Iterable[tuple[int, str]]) -> KeptChecks:
    """The checks of a session's rows (line, `chunk_check`). One that cannot be read only
    costs its run the time to decode it, as a torn line of a check file does."""
    checks: dict[int, ChunkCheck] = {}
    unreadable = []
    for line, text in rows:
        try:
            check = _check_decoder.decode(text)
        except msgspec.DecodeError:
            unreadable.append(line)
            continue
        if check.line != line:
            unreadable.append(line)
            continue
        checks[line] = check
    return KeptChecks(checks, unreadable)


def check_rows(session_id: str, checks: Iterable[ChunkCheck]) -> list[tuple[str, int, str]]:
    """(session, first line, the check's JSON text): the rows of `checks`."""
    return [(session_id, check.line, _check_encoder.encode(check).decode()) for check in checks]


def kept_rows(
    where: str,
    session_id: str,
    row: tuple[str, int] | None,
    bodies: list[bytes],
    kept: KeptChecks,
) -> KeptRows:
    """`stored_log` for a session about to be continued, with the chunk checks of its runs: a
    run whose rows match their check is kept as one `PackedChunks`, not decoded; every other
    row is decoded and checked as `stored_log` checks it, a run of them that is long enough
    getting a check made (`new_checks`) and kept packed too."""
    if row is None:
        raise SessionNotFound(f"unknown session {session_id!r}")
    header = session_header(where, session_id, row[0])
    checks = kept.checks
    checked = CheckedRecords(where, bodies)
    with collection_paused():
        records = list(checked.kept(checks))
    if checked.event_count != row[1]:
        raise CorruptLog(
            where,
            len(bodies) + 1,
            f"the records hold {checked.event_count} events, the session says {row[1]}",
        )
    used = {check.line for check in checked.used_checks}
    made = {check.line for check in checked.new_checks}
    stale = sorted(
        line for line in [*checks, *kept.unreadable] if line not in used and line not in made
    )
    return KeptRows(
        header,
        records,
        checked.event_count,
        len(bodies),
        checked.used_checks,
        checked.new_checks,
        stale,
    )


def copy_checks(rows: BatchRows, records: Sequence[StorageRecord]) -> list[ChunkCheck]:
    """The checks of the runs of chunk rows a copy of a session ends (`rows`, of `records`,
    from line 2 on): a run still open at its end gets none, as a writer's open run."""
    return ChunkRuns().feed_all(2, rows.lines, records)


def listed_sessions(
    rows: Iterable[tuple[str, str, str | None, int | None, bool | int]],
    where: Callable[[str], str],
) -> list[ListedSession]:
    """`session/list`'s sessions from their rows (id, header, title, last event time,
    archived); one whose header cannot be read is left out, with a warning."""
    listed = []
    for session_id, text, title, updated_at, archived in rows:
        try:
            header = session_header(where(session_id), session_id, text)
        except LogError as exc:
            log.warning("session/list: skipped session %s: %s", session_id, exc)
            continue
        listed.append(ListedSession(header, title, updated_at, archived=bool(archived)))
    return listed


def listed_page(
    rows: Sequence[tuple[str, str, str | None, int | None, bool | int, int]],
    limit: int,
    where: Callable[[str], str],
) -> ListedPage:
    """A list page from the rows `Statements.page` read (one more than `limit` when more
    follow)."""
    shown = rows[:limit]
    sessions = listed_sessions([row[:5] for row in shown], where)
    more = len(rows) > limit
    return ListedPage(sessions, (shown[-1][5], shown[-1][0]) if more else None)


def page_start(cuts: list[int], max_messages: int) -> int:
    """Where a page starts, from the cuts of the newest `max_messages` messages before its end
    (fewer: the page starts at the beginning)."""
    return min(cuts) if len(cuts) == max_messages else 0


def records_between(where: str, bodies: list[bytes], lo: int, hi: int) -> list[StorageRecord]:
    """The canonical packing of the events in `[lo, hi)` from the bodies `Statements.between`
    read, decoded a piece at a time, the short rows a stream's flushes left joined. A range
    read does not know the line it starts at: its records are numbered from line 2."""
    if not bodies:
        return []
    records, starts = joined_records(where, b"\n".join(bodies), 2)
    return pack_chunk_runs(clip_records(records, starts, lo, hi))


class SqlHistory(Generic[S]):
    """The store API's `HistorySource` of one session in a database: what both engines keep."""

    def __init__(self, store: S, header: SessionHeader) -> None:
        self.store = store
        self.header = header
        self.last_seq = -1

    def refreshed(self, row: tuple[int] | None) -> None:
        """Take the session's stored next seq, as read (None: the session is gone)."""
        if row is None:
            raise SessionNotFound(f"unknown session {self.header.id!r}")
        self.last_seq = row[0] - 1


class CountedLines:
    """The lines of a stored session (`SessionLines`), counted as they are yielded."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.torn_tail = False  # a transaction is whole or absent
        self.size = 0
        """Bytes of JSON text the lines read so far hold."""

    def counted(self, line: bytes) -> bytes:
        self.count += 1
        self.size += len(line) + 1
        return line


class _Store(Protocol):
    pack: bool

    def where(self, session_id: str) -> str: ...


class SqlWriter(QueuedAppends, BatchWrites):
    """The store API's `Writer` of one session in a database: its queue, its batches (one
    transaction each, `commit`), recovery and close. An engine brings `commit` and
    `close_now` (giving up its claim), and marks its driver's failures with `failing`."""

    def __init__(self, store: _Store, header: SessionHeader, next_seq: int) -> None:
        self.store = store
        self.header = header
        self.next_seq = next_seq
        self.stored_seq = next_seq
        """The seq the next batch written starts at."""
        self.failure: OSError | None = None
        self.writable = True
        self._pending: list[SessionEvent] = []
        self._unsynced = False
        self._lock = anyio.Lock()
        self.lines = 1
        """The line of the last row stored (the header is line 1): the chunk checks' key."""
        self._runs = ChunkRuns()

    @property
    def name(self) -> str:
        return self.store.where(self.header.id)

    def _location(self) -> str:
        return self.name

    async def commit(self, batch: Sequence[SessionEvent], sync: bool) -> None:
        """One transaction for the batch; with `sync`, durable once this returns."""
        raise NotImplementedError

    async def close_now(self) -> None:
        """Give up the claim without writing what is queued."""
        raise NotImplementedError

    async def reopen(self, now_ms: int) -> Opened:
        """Continue the session again after this writer failed (the store API's `Writer`)."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        raise NotImplementedError

    def records(self, batch: Sequence[SessionEvent]) -> list[StorageRecord]:
        """A batch as it is stored: packed unless the store says not to."""
        return pack_chunk_runs(batch) if self.store.pack else list(batch)

    def batch(self, batch: Sequence[SessionEvent]) -> tuple[BatchRows, list[ChunkCheck]]:
        """A batch's rows (from `stored_seq` on), and the checks of the runs of chunk rows it
        ends, to be written in the same transaction; `stored` once it is committed."""
        records = self.records(batch)
        rows = batch_rows(self.header.id, self.stored_seq, records)
        return rows, self._runs.feed_all(self.lines + 1, rows.lines, records)

    def stored(self, rows: BatchRows) -> None:
        """`rows` were committed."""
        self.stored_seq = rows.end
        self.lines += len(rows.lines)

    def restart(self, rows: int) -> None:
        """Go on after the session's `rows`, as a read found them: a run the writer had open
        when it failed gets no check (its rows may not all be stored)."""
        self.lines = rows + 1
        self._runs = ChunkRuns()

    def take(self) -> list[SessionEvent]:
        batch, self._pending = self._pending, []
        return batch

    @contextlib.contextmanager
    def failing(self, errors: type[E], os_error: Callable[[E], OSError]) -> Iterator[None]:
        """A write that fails refuses every later one: a stale batch, or the driver's
        `errors` (as the `OSError` `os_error` makes of one, raised as `LogWriteFailed`)."""
        try:
            yield
        except StaleWriter as exc:
            self.failure = exc.cause
            self._pending = []
            raise
        except errors as exc:
            self.failure = os_error(exc)
            self._pending = []
            raise LogWriteFailed(self.name, self.failure) from None

    async def _write(self, *, sync: bool) -> None:
        async with self._lock:
            self._check()
            batch = self.take()
            if batch or (sync and self._unsynced):
                with anyio.CancelScope(shield=True):  # a batch is committed or not, never half
                    await self.commit(batch, sync)

    async def keep_checks(self, new: list[ChunkCheck], stale: list[int]) -> None:
        """Keep the checks a read made and drop those it found stale, in one transaction; a
        failure is only logged (the checks are a cache: the next read decodes those runs)."""
        raise NotImplementedError

    async def recover(self, stored: KeptRows, now_ms: int) -> Opened:
        """Keep what the read found of the chunk checks, then close an interrupted turn (SPEC
        2.5), committed before this returns."""
        self.restart(stored.rows)
        if stored.new_checks or stored.stale_lines:
            await self.keep_checks(stored.new_checks, stored.stale_lines)
        return await self.recover_log(EventLog(stored.records), now_ms)

    async def recover_log(self, log_: EventLog, now_ms: int) -> Opened:
        """`recover` of a session read as `log_` (whole, or from a base)."""
        closers = interrupted_turn_closers(list(log_.plain_events()), log_.length, now_ms)
        if closers:
            try:
                self.append(closers)
                await self.commit(self.take(), True)
            except LogWriteFailed:
                return Opened(self, log_, False, [])
            for event in closers:
                log_.append(event)
        return Opened(self, log_, False, closers)

    async def opened(self, stored: KeptRows | EventLog, now_ms: int) -> Opened:
        """`recover`, the claim given up if that fails: how opening a session ends."""
        try:
            if isinstance(stored, EventLog):
                return await self.recover_log(stored, now_ms)
            return await self.recover(stored, now_ms)
        except BaseException:
            await self.close_now()
            raise

    async def close(self) -> None:
        async with self._lock:
            if self.closed:
                return
            with anyio.CancelScope(shield=True):
                try:
                    if self.failure is None:
                        batch = self.take()
                        if batch or self._unsynced:
                            await self.commit(batch, True)
                finally:
                    await self.close_now()
