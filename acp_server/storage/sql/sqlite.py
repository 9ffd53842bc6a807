"""The SQLite engine of the store API: one database file holding every session (SPEC 2.6).

Tables (all STRICT): `store` (the schema version), `sessions` (each header as written, the next
seq, the last title and event time, whether it is archived, and its cwd and origin, for listing
a page through an index by creation time, with or without the cwd), `records` (every storage record as written,
its JSON text byte for byte: a chunk row stays one row, keyed by session and first seq, with
the number of events it holds), `blobs` (checkpoints' file contents, by session and digest),
`messages` (the message index of SPEC 3.1: each message's seq
and where a page holding it must start), `children` (the `subagent/start`s) and `checks` (the
chunk checks of the runs of chunk rows, by session and first line: see `common`). A page reads
its messages from the index and then only its own records; a follow catch-up is a range read.

Each append batch is one transaction that first moves the session's stored next seq from the
batch's first seq on: a stale or second writer can never leave a gap or a duplicate. The
database runs in WAL mode; a flush commits with `synchronous=NORMAL` (safe from a crash of the
process), a sync with `synchronous=FULL` (safe from a crash of the machine). One writer per
session across processes: a lock file per session in `<db>.locks/` beside the database
(`flock`, released with its descriptor when the process dies), and the seq check.

A damaged database (SQLite finds a page that makes no sense: "database disk image is
malformed") is a `CorruptLog` of the session being read, naming the line reached where the read
goes through the log in order: the server answers it as any unreadable log.

Blocking work runs in anyio's worker threads: each writer has its own connection, the readers
share one behind a lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final

import anyio
import msgspec

from ...core.blobs import blob_digest, check_digest
from ...core.chunk_checks import ChunkCheck
from ...core.chunk_rows import StorageRecord
from ...core.event_log import EventLog
from ...core.events import SessionEvent
from ...core.header import SessionHeader
from ...core.ids import validate_session_id
from ...core.paging import PageCut
from ..api import (
    ArchiveFilter,
    ListedPage,
    ListedSession,
    ListPosition,
    Opened,
    PollingEngine,
    StoredLog,
)
from ..appends import BatchRows, batch_rows
from ..errors import (
    DamagedStore,
    LogError,
    LogWriteFailed,
    SessionExists,
    SessionNotFound,
    UnsupportedStore,
)
from . import common
from .sqlite_connect import (
    BUSY_TIMEOUT_MS,
    Claim,
    connect,
    damage_is_corrupt,
    is_damage,
    os_error,
    transaction,
)

_SCHEMA: Final = """
CREATE TABLE store (key TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    header TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    title TEXT,
    updated_at INTEGER,
    archived INTEGER NOT NULL DEFAULT 0,
    cwd TEXT NOT NULL DEFAULT '',
    origin TEXT
) STRICT;
CREATE TABLE records (
    session TEXT NOT NULL,
    seq0 INTEGER NOT NULL,
    count INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session, seq0)
) STRICT;
CREATE TABLE messages (
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    cut INTEGER NOT NULL,
    PRIMARY KEY (session, seq)
) STRICT, WITHOUT ROWID;
CREATE TABLE children (
    session TEXT NOT NULL,
    child TEXT NOT NULL,
    PRIMARY KEY (session, child)
) STRICT, WITHOUT ROWID;
CREATE TABLE blobs (
    session TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (session, sha256)
) STRICT;
CREATE TABLE checks (
    session TEXT NOT NULL,
    line INTEGER NOT NULL,
    chunk_check TEXT NOT NULL,
    PRIMARY KEY (session, line)
) STRICT, WITHOUT ROWID;
"""
_BLOBS_TABLE: Final = _SCHEMA[
    _SCHEMA.index("CREATE TABLE blobs") : _SCHEMA.index("CREATE TABLE checks")
].rstrip()
_CHECKS_TABLE: Final = _SCHEMA[_SCHEMA.index("CREATE TABLE checks") :].rstrip()
_TABLES: Final = ("blobs", "checks", "children", "messages", "records", "sessions")

_encoder: Final = msgspec.json.Encoder()
log = logging.getLogger(__name__)

READ_MAP_BYTES: Final = 1 << 30
"""How much of the database file the readers' connection reads through a memory map (SQLite's
`mmap_size`) rather than copying each page into its own cache: a continuation reads a whole
session, most of it chunk rows, once."""
_sql: Final = common.Statements("", "?", "header", "CAST(body AS BLOB)", "body")


class SqliteStore(PollingEngine):
    """The store API over one SQLite database."""

    def __init__(self, path: Path | str, *, pack: bool = True) -> None:
        self.path = Path(path)
        self.pack = pack
        self.locks = self.path.with_name(self.path.name + ".locks")
        self._read_lock = threading.Lock()
        self._db = self._open()

    @property
    def url(self) -> str:
        return f"sqlite://{self.path}"

    def where(self, session_id: str) -> str:
        """What names a session in an error."""
        return f"{self.url} session {session_id}"

    def _open(self) -> sqlite3.Connection:
        """Connect, creating the schema in a new database; refuse one of another version.

        Processes that start together on a new database race to switch it to WAL, and SQLite
        answers the losers "database is locked" at once, without its busy timeout: they try
        again, for as long as the busy timeout would have waited.
        """
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                return self._open_once()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise UnsupportedStore(f"{self.url}: cannot open the database: {exc}") from None
                time.sleep(0.01)
            except sqlite3.DatabaseError as exc:  # malformed, or not a database at all
                raise DamagedStore(f"{self.url}: cannot open the database: {exc}") from None
            except sqlite3.Error as exc:
                raise UnsupportedStore(f"{self.url}: cannot open the database: {exc}") from None

    def _open_once(self) -> sqlite3.Connection:
        db = connect(self.path)
        try:
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                raise UnsupportedStore(f"{self.url}: cannot use WAL mode (got {mode!r})")
            with transaction(db):
                self._check_schema(db)
            db.execute(f"PRAGMA mmap_size = {READ_MAP_BYTES}")
        except BaseException:
            db.close()
            raise
        return db

    def _check_schema(self, db: sqlite3.Connection) -> None:
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not names:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            for statement in _sql.list_indexes:
                db.execute(statement)
            db.execute(_sql.prefix_index)
            db.execute(_sql.set_schema_version, (common.SCHEMA_VERSION,))
            return
        if "store" not in names:
            raise UnsupportedStore(f"{self.url}: not an acp-server session store")
        row = db.execute(_sql.schema_version).fetchone()
        found = row[0] if row else None
        if common.upgrades(found):
            # In the caller's write transaction: another process opening it waits, then finds
            # the new version.
            if common.needs_archived_column(found):
                db.execute("ALTER TABLE sessions ADD COLUMN archived INTEGER NOT NULL DEFAULT 0")
            if common.needs_blobs_table(found):
                db.execute(_BLOBS_TABLE.rstrip(";"))
            if common.needs_checks_table(found):
                db.execute(_CHECKS_TABLE.rstrip(";"))
            if common.needs_list_columns(found):
                db.execute("ALTER TABLE sessions ADD COLUMN cwd TEXT NOT NULL DEFAULT ''")
                db.execute("ALTER TABLE sessions ADD COLUMN origin TEXT")
                rows = db.execute(_sql.list_columns).fetchall()
                db.executemany(_sql.set_list_columns, common.filled_list_columns(rows))
                for statement in _sql.list_indexes:
                    db.execute(statement)
            db.execute(_sql.prefix_index)
            db.execute(_sql.upgrade_schema_version, (common.SCHEMA_VERSION, found))
            return
        refused = common.version_refused(self.url, found)
        if refused is not None:
            raise refused
        # An index, not a table: a build without it reads and writes the same tables, and the
        # database keeps it in step with every writer's rows. Made once, by the first opener.
        db.execute(_sql.prefix_index)

    @contextlib.contextmanager
    def _reading(
        self, session_id: str | None = None, line: Callable[[], int] = lambda: 1
    ) -> Iterator[sqlite3.Connection]:
        """The shared read connection, in one read transaction (one snapshot).

        Damage met is the `CorruptLog` of the session read (of the store when there is none):
        at `line()`, by default line 1, the session's row, which holds its header.
        """
        where = self.url if session_id is None else self.where(session_id)
        with (
            damage_is_corrupt(where, line),
            self._read_lock,
            transaction(self._db, "DEFERRED"),
        ):
            yield self._db

    def _claim(self, session_id: str) -> Claim:
        return Claim(self.locks / f"{validate_session_id(session_id)}.lock", self.where(session_id))

    # -- creating and opening ------------------------------------------------------------------

    async def create(self, header: SessionHeader) -> SqliteWriter:
        with anyio.CancelScope(shield=True):
            result = await anyio.to_thread.run_sync(self._create, header)
        return result

    def _create(self, header: SessionHeader) -> SqliteWriter:
        claim = self._claim(header.id)
        try:
            writer = SqliteWriter(self, header, claim, next_seq=0)
            try:
                writer.db.execute("PRAGMA synchronous = FULL")
                with transaction(writer.db):
                    _insert_session(writer.db, header)
                writer.db.execute("PRAGMA synchronous = NORMAL")
            except sqlite3.IntegrityError:
                writer.db.close()
                raise SessionExists(f"session {header.id!r} already exists") from None
            except sqlite3.Error as exc:
                writer.db.close()
                raise LogWriteFailed(self.where(header.id), os_error(exc)) from None
        except BaseException:
            claim.release()
            raise
        return writer

    async def open(self, session_id: str, now_ms: int) -> Opened:
        with anyio.CancelScope(shield=True):
            writer, stored = await anyio.to_thread.run_sync(self._claimed, session_id)
            opened = await writer.opened(stored, now_ms)
        return opened

    async def open_tail(self, session_id: str, now_ms: int, max_messages: int) -> Opened:
        with anyio.CancelScope(shield=True):
            writer, held = await anyio.to_thread.run_sync(
                self._claimed_tail, session_id, max_messages
            )
            opened = await writer.opened(held, now_ms)
        return opened

    def _claimed_tail(
        self, session_id: str, max_messages: int
    ) -> tuple[SqliteWriter, EventLog | common.KeptRows]:
        """Claim the session's writer, then read it back from the end to its base; a session
        without a compaction is read whole (its provider history is all of it)."""
        claim = self._claim(session_id)
        try:
            with self._reading(session_id, _first_record_line) as db:
                mark = db.execute(_sql.latest_mark, (session_id,)).fetchone()
            if not common.compacted(mark[0] if mark else None):
                stored = self._kept(session_id)
                return SqliteWriter(self, stored.header, claim, stored.event_count), stored
            source = self._history(session_id)
            end = source.last_seq + 1
            read = common.read_tail(end, max_messages, source.page_now, source.records_now)
            base = read.base or 0
            with self._reading(session_id, _first_record_line) as db:
                bodies = [body for (body,) in db.execute(_sql.prefix, (session_id, base))]
                (rows,) = db.execute(_sql.row_count, (session_id,)).fetchone()
            prefix = common.tail_prefix(self.where(session_id), bodies)
            held = EventLog(read.held(), base=base, prefix=prefix)
            writer = SqliteWriter(self, source.header, claim, end)
            writer.restart(rows)  # its chunk checks are keyed by the rows stored before it
            return writer, held
        except BaseException:
            claim.release()
            raise

    def _claimed(self, session_id: str) -> tuple[SqliteWriter, common.KeptRows]:
        """Claim the session's writer, then read the session."""
        claim = self._claim(session_id)
        try:
            stored = self._kept(session_id)
            return SqliteWriter(self, stored.header, claim, stored.event_count), stored
        except BaseException:
            claim.release()
            raise

    # -- reading -------------------------------------------------------------------------------

    async def header(self, session_id: str) -> SessionHeader:
        return await anyio.to_thread.run_sync(self._header, session_id)

    def _header(self, session_id: str) -> SessionHeader:
        validate_session_id(session_id)
        with self._reading(session_id) as db:
            row = db.execute(_sql.header, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f"unknown session {session_id!r}")
        return common.session_header(self.where(session_id), session_id, row[0])

    async def exists(self, session_id: str) -> bool:
        return await anyio.to_thread.run_sync(self._exists, session_id)

    def _exists(self, session_id: str) -> bool:
        validate_session_id(session_id)
        with self._reading(session_id) as db:
            found = db.execute(_sql.exists, (session_id,)).fetchone()
        return found is not None

    async def read(self, session_id: str) -> StoredLog:
        return await anyio.to_thread.run_sync(self._read, session_id)

    def _read(self, session_id: str) -> StoredLog:
        """The whole session, every record checked as a JSONL reader checks its lines."""
        validate_session_id(session_id)
        bodies: list[bytes] = []
        # The header is line 1, the records the lines after it: damage stops the read at the
        # line after the last record read.
        with self._reading(session_id, lambda: len(bodies) + 2) as db:
            row = db.execute(_sql.header_and_next_seq, (session_id,)).fetchone()
            if row is not None:
                bodies.extend(body for (body,) in db.execute(_sql.bodies, (session_id,)))
        return common.stored_log(self.where(session_id), session_id, row, bodies)

    def _kept(self, session_id: str) -> common.KeptRows:
        """The whole session to be continued: `_read` with its runs' chunk checks."""
        validate_session_id(session_id)
        where = self.where(session_id)
        bodies: list[bytes] = []
        with self._reading(session_id, lambda: len(bodies) + 2) as db:
            row = db.execute(_sql.header_and_next_seq, (session_id,)).fetchone()
            checks = common.read_checks(db.execute(_sql.checks, (session_id,)).fetchall())
            if row is not None:
                bodies.extend(body for (body,) in db.execute(_sql.bodies, (session_id,)))
        return common.kept_rows(where, session_id, row, bodies, checks)

    async def history(self, session_id: str) -> SqliteHistory:
        return await anyio.to_thread.run_sync(self._history, session_id)

    def _history(self, session_id: str) -> SqliteHistory:
        header = self._header(session_id)
        source = SqliteHistory(self, header)
        source.refresh_now()
        return source

    async def list_sessions(self) -> list[ListedSession]:
        return await anyio.to_thread.run_sync(self._list)

    def _list(self) -> list[ListedSession]:
        with self._reading() as db:
            rows = db.execute(_sql.listed).fetchall()
        return common.listed_sessions(rows, self.where)

    async def list_page(
        self,
        cwd: str | None,
        after: ListPosition | None,
        limit: int,
        archived: ArchiveFilter,
    ) -> ListedPage:
        return await anyio.to_thread.run_sync(self._list_page, cwd, after, limit, archived)

    def _list_page(
        self, cwd: str | None, after: ListPosition | None, limit: int, archived: ArchiveFilter
    ) -> ListedPage:
        query, params = _sql.page(cwd, after, limit, archived)
        with self._reading() as db:
            rows = db.execute(query, params).fetchall()
        return common.listed_page(rows, limit, self.where)

    async def session_ids(self) -> list[str]:
        return await anyio.to_thread.run_sync(self._session_ids)

    def _session_ids(self) -> list[str]:
        with self._reading() as db:
            return [row[0] for row in db.execute(_sql.ids)]

    # -- deleting, copying ---------------------------------------------------------------------

    async def lines(self, session_id: str) -> StoredLines:
        return StoredLines(self, session_id)

    def _delete(self, session_id: str) -> None:
        if not self._exists(session_id):
            raise SessionNotFound(f"unknown session {session_id!r}")
        claim = self._claim(session_id)
        try:
            db = connect(self.path)
            try:
                with damage_is_corrupt(self.where(session_id), lambda: 1), transaction(db):
                    for table in _TABLES:
                        column = "id" if table == "sessions" else "session"
                        db.execute(f"DELETE FROM {table} WHERE {column} = ?", (session_id,))
            finally:
                db.close()
        finally:
            claim.release(remove=True)

    async def write_copy(self, header: SessionHeader, records: Sequence[StorageRecord]) -> None:
        await anyio.to_thread.run_sync(self._write_copy, header, records)

    def _write_copy(self, header: SessionHeader, records: Sequence[StorageRecord]) -> None:
        claim = self._claim(header.id)
        try:
            db = connect(self.path)
            try:
                db.execute("PRAGMA synchronous = FULL")
                with damage_is_corrupt(self.where(header.id), lambda: 1), transaction(db):
                    _insert_session(db, header)
                    rows = batch_rows(header.id, 0, records)
                    checks = common.copy_checks(rows, records)
                    _insert_records(db, self.where(header.id), header.id, rows, 0, checks)
            except sqlite3.IntegrityError:
                raise SessionExists(f"session {header.id!r} already exists") from None
            finally:
                db.close()
        finally:
            claim.release()

    # -- blobs --------------------------------------------------------------------------------

    async def put_blob(self, session_id: str, data: bytes) -> str:
        with anyio.CancelScope(shield=True):
            sha256 = await anyio.to_thread.run_sync(self._put_blob, session_id, data)
        return sha256

    def _put_blob(self, session_id: str, data: bytes) -> str:
        sha256 = blob_digest(data)
        db = connect(self.path)
        try:
            db.execute("PRAGMA synchronous = FULL")
            with damage_is_corrupt(self.where(session_id), lambda: 1), transaction(db):
                db.execute(
                    "INSERT OR IGNORE INTO blobs VALUES (?, ?, ?)", (session_id, sha256, data)
                )
        finally:
            db.close()
        return sha256

    async def get_blob(self, session_id: str, sha256: str) -> bytes | None:
        check_digest(sha256)
        return await anyio.to_thread.run_sync(self._get_blob, session_id, sha256)

    def _get_blob(self, session_id: str, sha256: str) -> bytes | None:
        with self._reading(session_id) as db:
            row = db.execute(
                "SELECT data FROM blobs WHERE session = ? AND sha256 = ?", (session_id, sha256)
            ).fetchone()
        return None if row is None else bytes(row[0])

    async def blob_digests(self, session_id: str) -> list[str]:
        return await anyio.to_thread.run_sync(self._blob_digests, session_id)

    def _blob_digests(self, session_id: str) -> list[str]:
        with self._reading(session_id) as db:
            rows = db.execute(
                "SELECT sha256 FROM blobs WHERE session = ? ORDER BY sha256", (session_id,)
            ).fetchall()
        return [row[0] for row in rows]

    async def damage(self) -> list[str]:
        """What SQLite's `PRAGMA quick_check` finds wrong in the whole file, a line each:
        nothing when the database is whole."""
        return await anyio.to_thread.run_sync(self._quick_check)

    def _quick_check(self) -> list[str]:
        try:
            with self._read_lock:
                rows = self._db.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as exc:
            # Damage bad enough that SQLite stops checking: its error is the finding.
            if not is_damage(exc):
                raise LogError(f"{self.url}: cannot check the database: {exc}") from None
            return [str(exc)]
        lines = [line for (text,) in rows for line in str(text).splitlines()]
        # The check's heading names the attached database: there is only "main".
        return [line for line in lines if line != "ok" and not line.startswith("*** in database")]

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        with self._read_lock:
            self._db.close()


def _insert_session(db: sqlite3.Connection, header: SessionHeader) -> None:
    db.execute(
        "INSERT INTO sessions (id, header, created_at, next_seq, cwd, origin) "
        "VALUES (?, ?, ?, 0, ?, ?)",
        (
            header.id,
            _encoder.encode(header).decode(),
            header.created_at,
            *common.list_columns(header),
        ),
    )


def _insert_records(
    db: sqlite3.Connection,
    where: str,
    session_id: str,
    batch: BatchRows,
    first: int,
    checks: Sequence[ChunkCheck],
) -> None:
    """Insert a batch's rows (their seqs from `first` on), what they add to the indexes and
    the chunk checks of the runs they end, after moving the session's next seq past them:
    refused (`StaleWriter`) unless it was `first`."""
    moved = db.execute(
        "UPDATE sessions SET next_seq = ?, title = coalesce(?, title), "
        "updated_at = coalesce(?, updated_at), archived = coalesce(?, archived) "
        "WHERE id = ? AND next_seq = ?",
        (batch.end, batch.title, batch.last_time, batch.archived, session_id, first),
    )
    if moved.rowcount != 1:
        raise common.stale(where, first, "another writer appended to the session")
    db.executemany("INSERT INTO records VALUES (?, ?, ?, ?)", batch.records)
    db.executemany(_sql.insert_messages, batch.messages)
    db.executemany("INSERT OR IGNORE INTO children VALUES (?, ?)", batch.children)
    db.executemany(_sql.keep_check, common.check_rows(session_id, checks))


class SqliteWriter(common.SqlWriter):
    """The store API's `Writer` of one session: its connection, its claim, its queue."""

    def __init__(self, store: SqliteStore, header: SessionHeader, claim: Claim, next_seq: int):
        super().__init__(store, header, next_seq)
        self.sqlite = store
        self.claim = claim
        self.db = connect(store.path)

    @property
    def closed(self) -> bool:
        return self.claim.fd < 0

    async def commit(self, batch: Sequence[SessionEvent], sync: bool) -> None:
        await anyio.to_thread.run_sync(self._commit, batch, sync)

    def _commit(self, batch: Sequence[SessionEvent], sync: bool) -> None:
        self._check()
        db = self.db
        with self.failing(sqlite3.Error, os_error):
            if not batch:
                self._sync_wal()
                return
            rows, checks = self.batch(batch)
            if sync:
                db.execute("PRAGMA synchronous = FULL")
            try:
                with transaction(db):
                    _insert_records(db, self.name, self.header.id, rows, self.stored_seq, checks)
            finally:
                if sync:
                    db.execute("PRAGMA synchronous = NORMAL")
            self.stored(rows)
            self._unsynced = not sync

    async def keep_checks(self, new: list[ChunkCheck], stale: list[int]) -> None:
        await anyio.to_thread.run_sync(self._keep_checks, new, stale)

    def _keep_checks(self, new: list[ChunkCheck], stale: list[int]) -> None:
        session_id = self.header.id
        try:
            with transaction(self.db):
                self.db.executemany(_sql.drop_check, [(session_id, line) for line in stale])
                self.db.executemany(_sql.keep_check, common.check_rows(session_id, new))
        except sqlite3.Error as exc:
            log.warning("%s: chunk checks not kept: %s", self.name, exc)

    def _sync_wal(self) -> None:
        """Make the commits made with `synchronous=NORMAL` durable: fsync the WAL."""
        try:
            fd = os.open(f"{self.sqlite.path}-wal", os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return  # checkpointed and removed: the database file holds it, synced
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._unsynced = False

    async def reopen(self, now_ms: int) -> Opened:
        """Re-read the session and go on writing it with this claim (claimed anew if closed)."""
        if self.closed:
            return await self.sqlite.open(self.header.id, now_ms)
        with anyio.CancelScope(shield=True):
            stored = await anyio.to_thread.run_sync(self.sqlite._kept, self.header.id)
            self.failure = None
            self._pending = []
            self.next_seq = self.stored_seq = stored.event_count
            opened = await self.recover(stored, now_ms)
        return opened

    async def close_now(self) -> None:
        self.release()

    def release(self) -> None:
        """Give up the claim without writing what is queued."""
        with contextlib.suppress(sqlite3.Error):
            self.db.close()
        self.claim.release()


def _first_record_line() -> int:
    # A range read does not know the line it starts at: it numbers its records from line 2, as
    # `common.records_between` does decoding them.
    return 2


class SqliteHistory(common.SqlHistory[SqliteStore]):
    """The store API's `HistorySource` of one session in the database."""

    async def refresh(self) -> None:
        await anyio.to_thread.run_sync(self.refresh_now)

    def refresh_now(self) -> None:
        with self.store._reading(self.header.id) as db:
            self.refreshed(db.execute(_sql.next_seq, (self.header.id,)).fetchone())

    async def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        return await anyio.to_thread.run_sync(self.page_now, end, max_messages)

    def page_now(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        session_id = self.header.id
        with self.store._reading(session_id, _first_record_line) as db:
            cuts = [cut for (cut,) in db.execute(_sql.cuts, (session_id, end, max_messages))]
            start = common.page_start(cuts, max_messages)
            return PageCut(start, end), self._between(db, start, end)

    async def records(self, lo: int, hi: int) -> list[StorageRecord]:
        return await anyio.to_thread.run_sync(self.records_now, lo, hi)

    def records_now(self, lo: int, hi: int) -> list[StorageRecord]:
        with self.store._reading(self.header.id, _first_record_line) as db:
            return self._between(db, lo, hi)

    def _between(self, db: sqlite3.Connection, lo: int, hi: int) -> list[StorageRecord]:
        if lo >= hi:
            return []
        session_id = self.header.id
        query = db.execute(_sql.between, (session_id, hi, session_id, lo))
        return common.records_between(
            self.store.where(session_id), [body for (body,) in query], lo, hi
        )

    async def has_child(self, child_id: str) -> bool:
        return await anyio.to_thread.run_sync(self._has_child, child_id)

    def _has_child(self, child_id: str) -> bool:
        with self.store._reading(self.header.id) as db:
            found = db.execute(_sql.has_child, (self.header.id, child_id)).fetchone()
        return found is not None


class StoredLines(common.CountedLines):
    """A session's header and records as the lines of a JSONL log would hold them, streamed
    from the database in one read transaction: the log tools read every engine as lines."""

    def __init__(self, store: SqliteStore, session_id: str) -> None:
        super().__init__(store.where(session_id))
        self.store = store
        self.session_id = validate_session_id(session_id)

    def __iter__(self) -> Iterator[bytes]:
        db = connect(self.store.path)
        try:
            with (
                damage_is_corrupt(self.path, lambda: self.count + 1),
                transaction(db, "DEFERRED"),
            ):
                row = db.execute(_sql.header, (self.session_id,)).fetchone()
                if row is None:
                    raise SessionNotFound(f"unknown session {self.session_id!r}")
                yield self.counted(row[0].encode())
                query = "SELECT body FROM records WHERE session = ? ORDER BY seq0"
                for (body,) in db.execute(query, (self.session_id,)):
                    yield self.counted(body.encode())
        finally:
            db.close()
