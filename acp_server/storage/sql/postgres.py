"""The PostgreSQL engine of the store API: one database shared by many hosts (SPEC 2.6).

Tables (`acp_` before each name, so that the store can share a database): `acp_store` (the
schema version), `acp_sessions` (each header as written, the next seq, the writer's epoch, the
last title and event time, whether it is archived, and its cwd and origin, for listing a page
through an index by creation time, with or without the cwd), `acp_records` (every storage record as written, in a
`json` column, which keeps the text byte for byte where `jsonb` would reorder keys and refuse
`\\u0000`, and stored uncompressed: a load read the bytes faster than the server inflated them;
keyed by session and first seq, with the number of events it holds), `acp_messages`
(SPEC 3.1's message index, so a page reads only what it returns), `acp_children`,
`acp_blobs` (checkpoints' file contents by session and digest) and `acp_checks` (the chunk
checks of the runs of chunk rows, by session and first line: see `common`). They are created on
first use; a database of another schema version is refused (earlier versions are upgraded in
place: see `common.upgrades`).

One writer per session across hosts: the writer holds a session-level advisory lock on its own
connection for as long as it has the session open, and takes a new epoch when it claims it.
Each batch is one transaction on that connection: the session's next seq moves from the batch's
first seq only under the writer's epoch, then the rows go in, then a `pg_notify` names the
session. A writer that lost its lock (its connection dropped) and one behind the stored next
seq can never commit. A flush commits with `synchronous_commit` off (safe from a crash of this
process), a sync with it on (safe from a crash of the database server).

A writer whose connection is lost (a restart, a failover, its backend ended) reconnects for up
to the store's `retry_seconds`, to the primary of the hosts the URL names, and claims the
session again as opening it does (the lock, then a new epoch). It holds every batch written
since the last synchronous commit (`core.held_batches`), so from the stored next seq it writes
again exactly what the store lacks, an asynchronous commit the server lost included.

Reads borrow short-lived connections from a `psycopg_pool` pool, each in one repeatable-read
transaction. With `read_url` (`--store-read`), pages, follow catch-ups, whole-session reads and
lists go to a standby first, when it holds what the reader needs (`postgres_standby`); a URL of
several hosts has its writers ask for the primary. Following is fed by the database: one
listening connection per store (never one of the pool) wakes the watches of a session on its
notifications, and all of them after every reconnect (notifications sent while it was
disconnected are lost); a watch also wakes on a slow safety poll. Whoever wakes reads by seq
from what it has: never by a global order.
"""

from __future__ import annotations

import contextlib
import errno
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Final, TypeVar

import anyio
import msgspec
import psycopg
from psycopg import AsyncConnection, errors, sql
from psycopg_pool import AsyncConnectionPool

from ...core.blobs import blob_digest, check_digest
from ...core.chunk_checks import ChunkCheck
from ...core.chunk_rows import StorageRecord
from ...core.event_log import EventLog
from ...core.events import SessionEvent
from ...core.header import SessionHeader
from ...core.held_batches import HeldBatches, NotHeld, StoreAhead, retry_delay
from ...core.ids import validate_session_id
from ...core.paging import PageCut
from ...core.tail import TailRead
from ..api import ArchiveFilter, ListedPage, ListedSession, ListPosition, Opened, StoredLog
from ..appends import BatchRows, batch_rows
from ..errors import (
    LogLocked,
    LogWriteFailed,
    SessionExists,
    SessionNotFound,
    StaleWriter,
    UnsupportedStore,
)
from ..redact import redact_url
from . import common
from .postgres_links import (
    CHANNEL,
    LOCK_KEY,
    Listener,
    PostgresWatch,
    lock_key,
    os_error,
    primary_connection,
    reading_pool,
    said,
)
from .postgres_standby import PRIMARY_POSITION, StandbyReads, writer_conninfo

log = logging.getLogger(__name__)

_GONE: Final = ("08", "57P", "25006")
"""The SQLSTATEs (classes and codes) of a connection that is lost or no longer on a primary:
connection exceptions, the server shutting down or the backend terminated, and a read-only
transaction (a server demoted to a standby)."""

LOCK_CLASS: Final = 0x61637053
"""The key ("acpS") of the advisory lock that creating the tables takes (one bigint key: a space
apart from the two-integer keys of the sessions' locks)."""

_SCHEMA: Final = """
CREATE TABLE acp_store (key text PRIMARY KEY, value integer NOT NULL);
CREATE TABLE acp_sessions (
    id text PRIMARY KEY,
    header json NOT NULL,
    created_at bigint NOT NULL,
    next_seq bigint NOT NULL,
    epoch bigint NOT NULL,
    title text,
    updated_at bigint,
    archived boolean NOT NULL DEFAULT false,
    cwd text NOT NULL DEFAULT '',
    origin text
);
CREATE TABLE acp_records (
    session text NOT NULL,
    seq0 bigint NOT NULL,
    count integer NOT NULL,
    body json NOT NULL,
    PRIMARY KEY (session, seq0)
);
ALTER TABLE acp_records ALTER COLUMN body SET STORAGE EXTERNAL;
CREATE TABLE acp_messages (
    session text NOT NULL,
    seq bigint NOT NULL,
    cut bigint NOT NULL,
    PRIMARY KEY (session, seq)
);
CREATE TABLE acp_children (
    session text NOT NULL,
    child text NOT NULL,
    PRIMARY KEY (session, child)
);
CREATE TABLE acp_blobs (
    session text NOT NULL,
    sha256 text NOT NULL,
    data bytea NOT NULL,
    PRIMARY KEY (session, sha256)
);
CREATE TABLE acp_checks (
    session text NOT NULL,
    line bigint NOT NULL,
    chunk_check text NOT NULL,
    PRIMARY KEY (session, line)
)
"""
_BLOBS_TABLE: Final = _SCHEMA[
    _SCHEMA.index("CREATE TABLE acp_blobs") : _SCHEMA.index("CREATE TABLE acp_checks")
].rstrip()
_CHECKS_TABLE: Final = _SCHEMA[_SCHEMA.index("CREATE TABLE acp_checks") :]
_TABLES: Final = (
    "acp_blobs",
    "acp_checks",
    "acp_children",
    "acp_messages",
    "acp_records",
    "acp_sessions",
)
T = TypeVar("T")
_encoder: Final = msgspec.json.Encoder()
log = logging.getLogger(__name__)
# A record's body is read as the bytes of its JSON text (`postgres_links.JsonBytes`): cast to `text`, the
# server would copy it and the driver decode it, only for the reader to encode it again.
_sql: Final = common.Statements("acp_", "%s", "header::text", "body", "body::text")
_CLAIM: Final = (
    "UPDATE acp_sessions SET epoch = epoch + 1 WHERE id = %s RETURNING epoch, header::text, "
    "next_seq"
)


class PostgresStore:
    """The store API over one PostgreSQL database (`conninfo`: a URL or libpq string)."""

    def __init__(
        self,
        conninfo: str,
        *,
        pack: bool = True,
        read_url: str | None = None,
        retry_seconds: float = 30.0,
    ) -> None:
        self.conninfo = writer_conninfo(conninfo)
        self.pack = pack
        self.retry_seconds = retry_seconds
        """How long a writer that lost its connection reconnects before its writes fail."""
        self._shown = redact_url(conninfo)
        self.standby = None if read_url is None else StandbyReads(read_url)
        """Where what only reads goes first (`--store-read`); None: everything is read here."""
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._ready = anyio.Lock()
        self._listener: Listener | None = None

    @property
    def url(self) -> str:
        return self._shown

    def where(self, session_id: str) -> str:
        """What names a session in an error."""
        return f"{self.url} session {session_id}"

    async def connect(self) -> AsyncConnection[Any]:
        """A connection of its own (a writer's, the listener's), in autocommit mode."""
        try:
            return await primary_connection(self.conninfo)
        except psycopg.Error as exc:
            raise LogWriteFailed(self.url, os_error(exc)) from None

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection in one transaction (one snapshot), the schema checked first."""
        pool = await self._open()
        try:
            async with pool.connection() as conn:
                yield conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # The database is unreachable: a storage failure of the request, not a bug.
            raise OSError(errno.ECONNRESET, f"{self.url}: {said(exc)}") from None

    async def _open(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        if self._pool is not None:
            return self._pool
        async with self._ready:
            if self._pool is None:
                conn = await self._connect_checked()
                try:
                    await self._check_schema(conn)
                finally:
                    await conn.close()
                pool: AsyncConnectionPool[AsyncConnection[Any]] = reading_pool(self.conninfo)
                await pool.open()
                self._pool = pool
        return self._pool

    async def _connect_checked(self) -> AsyncConnection[Any]:
        try:
            return await primary_connection(self.conninfo)
        except psycopg.Error as exc:
            raise UnsupportedStore(f"{self.url}: cannot connect: {said(exc)}") from None

    async def _check_schema(self, conn: AsyncConnection[Any]) -> None:
        """Create the tables in a database that has none; refuse one of another version."""
        async with conn.transaction():
            # Two processes starting on an empty database: one creates, the other waits.
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_CLASS,))
            cur = await conn.execute("SELECT to_regclass('acp_store') IS NOT NULL")
            row = await cur.fetchone()
            if row is None or not row[0]:
                for statement in [*_SCHEMA.split(";"), *_sql.list_indexes]:
                    await conn.execute(statement.encode())
                await conn.execute(_sql.prefix_index.encode())
                await conn.execute(_sql.set_schema_version, (common.SCHEMA_VERSION,))
                return
            cur = await conn.execute(_sql.schema_version)
            row = await cur.fetchone()
            found = row[0] if row else None
            if common.upgrades(found):
                # Under the advisory lock: one process upgrades, the others find the new version.
                if common.needs_archived_column(found):
                    await conn.execute(
                        "ALTER TABLE acp_sessions ADD COLUMN archived boolean NOT NULL "
                        "DEFAULT false"
                    )
                if common.needs_blobs_table(found):
                    await conn.execute(_BLOBS_TABLE.rstrip(";").encode())
                if common.needs_checks_table(found):
                    await conn.execute(_CHECKS_TABLE.encode())
                if common.needs_list_columns(found):
                    await self._add_list_columns(conn)
                await conn.execute(_sql.prefix_index.encode())
                await conn.execute(_sql.upgrade_schema_version, (common.SCHEMA_VERSION, found))
                return
            if found == common.SCHEMA_VERSION:
                # An index, not a table: a build without it reads and writes the same tables,
                # and the database keeps it in step with every writer's rows. Looked for first:
                # creating it, even "IF NOT EXISTS", takes the tables' owner, which a role that
                # only reads and writes them is not.
                cur = await conn.execute("SELECT to_regclass('acp_records_prefix') IS NULL")
                missing = await cur.fetchone()
                if missing is not None and missing[0]:
                    await conn.execute(_sql.prefix_index.encode())
        refused = common.version_refused(self.url, found)
        if refused is not None:
            raise refused

    async def _add_list_columns(self, conn: AsyncConnection[Any]) -> None:
        await conn.execute("ALTER TABLE acp_sessions ADD COLUMN cwd text NOT NULL DEFAULT ''")
        await conn.execute("ALTER TABLE acp_sessions ADD COLUMN origin text")
        cur = await conn.execute(_sql.list_columns)
        filled = common.filled_list_columns(await cur.fetchall())
        if filled:
            async with conn.cursor() as many:
                await many.executemany(_sql.set_list_columns, filled)
        for statement in _sql.list_indexes:
            await conn.execute(statement.encode())

    async def prepare(self) -> None:
        """Connect and create the tables now (`serve`, `acp-server store init`), or check the
        schema version of those there."""
        await self._open()

    # -- creating and opening ------------------------------------------------------------------

    async def _claimed(self, session_id: str) -> AsyncConnection[Any]:
        """A writer's connection holding the session's advisory lock (`LogLocked`)."""
        await self._open()
        conn = await self.connect()
        try:
            cur = await conn.execute(
                f"SELECT pg_try_advisory_lock({LOCK_KEY})", lock_key(session_id)
            )
            row = await cur.fetchone()
        except psycopg.Error as exc:
            await conn.close()
            raise LogWriteFailed(self.where(session_id), os_error(exc)) from None
        if row is None or not row[0]:
            await conn.close()
            raise LogLocked(
                f"{self.where(session_id)}: the session is open for writing in another process"
            )
        return conn

    async def create(self, header: SessionHeader) -> PostgresWriter:
        validate_session_id(header.id)
        with anyio.CancelScope(shield=True):
            conn = await self._claimed(header.id)
            try:
                await conn.execute(
                    "INSERT INTO acp_sessions (id, header, created_at, next_seq, epoch, cwd, "
                    "origin) VALUES (%s, %s::json, %s, 0, 1, %s, %s)",
                    (
                        header.id,
                        _encoder.encode(header).decode(),
                        header.created_at,
                        *common.list_columns(header),
                    ),
                )
            except errors.UniqueViolation:
                await conn.close()
                raise SessionExists(f"session {header.id!r} already exists") from None
            except psycopg.Error as exc:
                await conn.close()
                raise LogWriteFailed(self.where(header.id), os_error(exc)) from None
        return PostgresWriter(self, header, conn, next_seq=0, epoch=1)

    async def open(self, session_id: str, now_ms: int) -> Opened:
        validate_session_id(session_id)
        with anyio.CancelScope(shield=True):
            conn = await self._claimed(session_id)
            try:
                epoch, row = await _claim(conn, session_id)
                stored = await self._kept(conn, session_id, row)
            except psycopg.Error as exc:
                await conn.close()
                raise LogWriteFailed(self.where(session_id), os_error(exc)) from None
            except BaseException:
                await conn.close()
                raise
            writer = PostgresWriter(self, stored.header, conn, stored.event_count, epoch)
            opened = await writer.opened(stored, now_ms)
        return opened

    async def open_tail(self, session_id: str, now_ms: int, max_messages: int) -> Opened:
        validate_session_id(session_id)
        with anyio.CancelScope(shield=True):
            conn = await self._claimed(session_id)
            try:
                epoch, claimed = await _claim(conn, session_id)
                async with self.reading() as reading:
                    cur = await reading.execute(_sql.latest_mark, (session_id,))
                    mark = await cur.fetchone()
                held: EventLog | common.KeptRows
                rows: int | None = None
                if common.compacted(mark[0] if mark else None):
                    header, held, rows = await self._tail(session_id, max_messages)
                    next_seq = len(held)
                else:  # its provider history is all of it: read whole
                    stored = await self._kept(conn, session_id, claimed)
                    header, held, next_seq = stored.header, stored, stored.event_count
            except psycopg.Error as exc:
                await conn.close()
                raise LogWriteFailed(self.where(session_id), os_error(exc)) from None
            except BaseException:
                await conn.close()
                raise
            writer = PostgresWriter(self, header, conn, next_seq, epoch)
            if rows is not None:
                writer.restart(rows)  # its chunk checks are keyed by the rows stored before it
            opened = await writer.opened(held, now_ms)
        return opened

    async def _tail(
        self, session_id: str, max_messages: int
    ) -> tuple[SessionHeader, EventLog, int]:
        """The session read back from the end to its base (`core.tail`), and how many rows it
        has stored."""
        source = await self.history(session_id)
        end = source.last_seq + 1
        read = TailRead(end, max_messages)
        if end:
            cut, records = await source.page(end, max_messages)
            read.took(records, cut.start)
        while (wanted := read.wanted()) is not None:
            read.took(await source.records(*wanted), wanted[0])
        base = read.base or 0
        async with self.reading() as conn:
            cur = await conn.execute(_sql.prefix, (session_id, base))
            bodies = [body for (body,) in await cur.fetchall()]
            cur = await conn.execute(_sql.row_count, (session_id,))
            counted = await cur.fetchone()
        assert counted is not None
        prefix = common.tail_prefix(self.where(session_id), bodies)
        return source.header, EventLog(read.held(), base=base, prefix=prefix), int(counted[0])

    # -- reading -------------------------------------------------------------------------------

    async def header(self, session_id: str) -> SessionHeader:
        validate_session_id(session_id)
        async with self.reading() as conn:
            cur = await conn.execute(_sql.header, (session_id,))
            row = await cur.fetchone()
        if row is None:
            raise SessionNotFound(f"unknown session {session_id!r}")
        return common.session_header(self.where(session_id), session_id, row[0])

    async def exists(self, session_id: str) -> bool:
        validate_session_id(session_id)
        async with self.reading() as conn:
            cur = await conn.execute(_sql.exists, (session_id,))
            return await cur.fetchone() is not None

    async def read(self, session_id: str) -> StoredLog:
        validate_session_id(session_id)
        found = None
        if self.standby is not None:
            # Read by a process that does not write it: a standby may serve it, once it holds
            # every record the primary does.
            need = await self.next_seq(session_id)
            if need is not None:
                found = await self.standby.session(
                    session_id, need, lambda conn: _rows(conn, session_id, _sql.header_and_next_seq)
                )
        if found is None:
            return await self._read(session_id)
        row, bodies = found
        return common.stored_log(self.where(session_id), session_id, row, bodies)

    async def _read(self, session_id: str) -> StoredLog:
        """The whole session from the primary, every record checked as a JSONL reader checks
        its lines."""
        row, bodies = await self._rows(session_id, _sql.header_and_next_seq)
        return common.stored_log(self.where(session_id), session_id, row, bodies)

    async def _kept(
        self, conn: AsyncConnection[Any], session_id: str, row: tuple[str, int]
    ) -> common.KeptRows:
        """The session claimed on `conn` (`_claim`: its header and next seq, `row`) read whole
        to be continued: `_read` with its runs' chunk checks. Read on that connection, outside
        a transaction: under the lock nothing else writes or deletes the session, and a pooled
        connection's snapshot would only cost more round trips."""
        cur = await conn.execute(_sql.checks, (session_id,))
        checks = common.read_checks(await cur.fetchall())
        bodies = await _bodies(conn, session_id)
        return common.kept_rows(self.where(session_id), session_id, row, bodies, checks)

    async def _rows(self, session_id: str, query: str) -> tuple[Any, list[bytes]]:
        """The session's row (`query`) and its records' bodies, read in one transaction."""
        async with self.reading() as conn:
            return await _rows(conn, session_id, query)

    async def next_seq(self, session_id: str) -> int | None:
        """The session's stored next seq on the primary (None: no such session)."""
        async with self.reading() as conn:
            cur = await conn.execute(_sql.next_seq, (session_id,))
            row = await cur.fetchone()
        return None if row is None else int(row[0])

    async def history(self, session_id: str) -> PostgresHistory:
        source = PostgresHistory(self, await self.header(session_id))
        await source.refresh()
        return source

    async def list_sessions(self) -> list[ListedSession]:
        rows = await self._listing(_listed)
        return common.listed_sessions(rows, self.where)

    async def list_page(
        self,
        cwd: str | None,
        after: ListPosition | None,
        limit: int,
        archived: ArchiveFilter,
    ) -> ListedPage:
        query, params = _sql.page(cwd, after, limit, archived)

        async def page(conn: AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(query.encode(), params)
            return await cur.fetchall()

        return common.listed_page(await self._listing(page), limit, self.where)

    async def _listing(self, read: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        """`read` of the session list: on a standby that has replayed what the primary holds
        now, else on the primary."""
        if self.standby is not None:
            async with self.reading() as conn:
                cur = await conn.execute(PRIMARY_POSITION)
                position = await cur.fetchone()
            if position is not None:
                found = await self.standby.listing(position[0], read)
                if found is not None:
                    return found
        async with self.reading() as conn:
            return await read(conn)

    async def session_ids(self) -> list[str]:
        async with self.reading() as conn:
            cur = await conn.execute(_sql.ids)
            return [row[0] for row in await cur.fetchall()]

    async def damage(self) -> list[str]:
        return []  # the database server keeps its own pages whole

    async def lines(self, session_id: str) -> StoredRows:
        """A session's header and records as the lines of a JSONL log would hold them, read
        in one transaction: the log tools read every engine as lines."""
        validate_session_id(session_id)
        row, bodies = await self._rows(session_id, _sql.header)
        if row is None:
            raise SessionNotFound(f"unknown session {session_id!r}")
        return StoredRows(self.where(session_id), [row[0].encode(), *bodies])

    def watch(self, session_id: str) -> PostgresWatch:
        """A watch woken when the session may have grown (registered from now on)."""
        if self._listener is None:
            self._listener = Listener(self.conninfo, self.url)
        return self._listener.watch(session_id)

    # -- deleting, copying ---------------------------------------------------------------------

    async def delete(self, session_id: str) -> None:
        validate_session_id(session_id)
        with anyio.CancelScope(shield=True):
            async with self.reading() as conn:
                cur = await conn.execute(
                    f"SELECT pg_try_advisory_xact_lock({LOCK_KEY})", lock_key(session_id)
                )
                row = await cur.fetchone()
                if row is None or not row[0]:
                    raise LogLocked(
                        f"{self.where(session_id)}: the session is open for writing "
                        "in another process"
                    )
                cur = await conn.execute("DELETE FROM acp_sessions WHERE id = %s", (session_id,))
                if cur.rowcount != 1:
                    raise SessionNotFound(f"unknown session {session_id!r}")
                for table in _TABLES[:-1]:
                    await conn.execute(
                        sql.SQL("DELETE FROM {} WHERE session = %s").format(sql.Identifier(table)),
                        (session_id,),
                    )
                await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, session_id))

    async def write_copy(self, header: SessionHeader, records: Sequence[StorageRecord]) -> None:
        validate_session_id(header.id)
        try:
            async with self.reading() as conn:
                cur = await conn.execute(
                    f"SELECT pg_try_advisory_xact_lock({LOCK_KEY})", lock_key(header.id)
                )
                row = await cur.fetchone()
                if row is None or not row[0]:
                    raise LogLocked(
                        f"{self.where(header.id)}: the session is open for writing "
                        "in another process"
                    )
                await conn.execute(
                    "INSERT INTO acp_sessions (id, header, created_at, next_seq, epoch, cwd, "
                    "origin) VALUES (%s, %s::json, %s, 0, 0, %s, %s)",
                    (
                        header.id,
                        _encoder.encode(header).decode(),
                        header.created_at,
                        *common.list_columns(header),
                    ),
                )
                rows = batch_rows(header.id, 0, records)
                checks = common.copy_checks(rows, records)
                await _insert_records(conn, self.where(header.id), header.id, rows, 0, 0, checks)
        except errors.UniqueViolation:
            raise SessionExists(f"session {header.id!r} already exists") from None

    # -- blobs --------------------------------------------------------------------------------

    async def put_blob(self, session_id: str, data: bytes) -> str:
        sha256 = blob_digest(data)
        with anyio.CancelScope(shield=True):
            async with self.reading() as conn:
                await conn.execute(
                    "INSERT INTO acp_blobs VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                    (session_id, sha256, data),
                )
        return sha256

    async def get_blob(self, session_id: str, sha256: str) -> bytes | None:
        check_digest(sha256)
        async with self.reading() as conn:
            cur = await conn.execute(
                "SELECT data FROM acp_blobs WHERE session = %s AND sha256 = %s",
                (session_id, sha256),
            )
            row = await cur.fetchone()
        return None if row is None else bytes(row[0])

    async def blob_digests(self, session_id: str) -> list[str]:
        async with self.reading() as conn:
            cur = await conn.execute(
                "SELECT sha256 FROM acp_blobs WHERE session = %s ORDER BY sha256", (session_id,)
            )
            rows = await cur.fetchall()
        return [row[0] for row in rows]

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            if self._listener is not None:
                await self._listener.aclose()
                self._listener = None
            if self._pool is not None:
                await self._pool.close()
                self._pool = None
            if self.standby is not None:
                await self.standby.aclose()


async def _closed(conn: AsyncConnection[Any]) -> None:
    with contextlib.suppress(psycopg.Error, OSError):
        await conn.close()


async def _rows(conn: AsyncConnection[Any], session_id: str, query: str) -> tuple[Any, list[bytes]]:
    """The session's row (`query`) and its records' bodies (None and none: no such session)."""
    cur = await conn.execute(query, (session_id,))
    row = await cur.fetchone()
    if row is None:
        return None, []
    return row, await _bodies(conn, session_id)


async def _claim(conn: AsyncConnection[Any], session_id: str) -> tuple[int, tuple[str, int]]:
    """The new epoch of the session whose lock `conn` holds, with its header and next seq.
    The new epoch first: a writer that lost the lock can commit nothing after."""
    cur = await conn.execute(_CLAIM, (session_id,))
    row = await cur.fetchone()
    if row is None:
        raise SessionNotFound(f"unknown session {session_id!r}")
    return row[0], (row[1], row[2])


async def _bodies(conn: AsyncConnection[Any], session_id: str) -> list[bytes]:
    """The session's records' bodies in seq order, as the bytes of their JSON text."""
    cur = await conn.execute(_sql.bodies, (session_id,))
    result = cur.pgresult
    if result is None:
        return []
    # Taken straight from the result: a whole session is tens of thousands of rows, and a
    # loader and a row tuple for each cost a load more than the server took to send them.
    value = result.get_value
    return [value(i, 0) or b"" for i in range(result.ntuples)]


async def _listed(conn: AsyncConnection[Any]) -> list[Any]:
    cur = await conn.execute(_sql.listed)
    return await cur.fetchall()


async def _insert_records(
    conn: AsyncConnection[Any],
    where: str,
    session_id: str,
    batch: BatchRows,
    first: int,
    epoch: int,
    checks: Sequence[ChunkCheck],
) -> None:
    """In the caller's transaction: move the session's next seq past a batch's rows (their seqs
    from `first` on), refused (`StaleWriter`) unless it was `first` and the epoch is `epoch`;
    then insert them, what they add to the indexes and the chunk checks of the runs they end,
    and notify the session's followers."""
    cur = await conn.execute(
        "UPDATE acp_sessions SET next_seq = %s, title = coalesce(%s, title), "
        "updated_at = coalesce(%s, updated_at), archived = coalesce(%s, archived) "
        "WHERE id = %s AND next_seq = %s AND epoch = %s",
        (batch.end, batch.title, batch.last_time, batch.archived, session_id, first, epoch),
    )
    if cur.rowcount != 1:
        raise common.stale(where, first, "another writer appended to the session, or took it over")
    async with conn.cursor() as many:
        if batch.records:
            await many.executemany(
                "INSERT INTO acp_records VALUES (%s, %s, %s, %s::json)", batch.records
            )
        if batch.messages:
            await many.executemany(_sql.insert_messages, batch.messages)
        if batch.children:
            await many.executemany(
                "INSERT INTO acp_children VALUES (%s, %s) ON CONFLICT DO NOTHING", batch.children
            )
        if checks:
            await many.executemany(_sql.keep_check, common.check_rows(session_id, checks))
    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, session_id))


class PostgresWriter(common.SqlWriter):
    """The store API's `Writer` of one session: its connection (holding the session's
    advisory lock), its epoch, its queue."""

    def __init__(
        self,
        store: PostgresStore,
        header: SessionHeader,
        conn: AsyncConnection[Any],
        next_seq: int,
        epoch: int,
    ) -> None:
        super().__init__(store, header, next_seq)
        self.postgres = store
        self.held = HeldBatches(next_seq)
        """What was written since the last synchronous commit, written again after a
        reconnect from the stored next seq."""
        self.conn = conn
        self.epoch = epoch
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def commit(self, batch: Sequence[SessionEvent], sync: bool) -> None:
        """One transaction for what the store lacks; the connection lost, the session is
        claimed again and it is written again, for up to the store's `retry_seconds`."""
        self._check()
        self.held.hold(batch)
        deadline: float | None = None
        with self.failing(psycopg.Error, os_error):
            while True:
                try:
                    await self._commit_held(sync)
                    break
                except psycopg.Error as exc:
                    if not self._lost(exc) or self.postgres.retry_seconds <= 0:
                        raise
                    if deadline is None:
                        deadline = anyio.current_time() + self.postgres.retry_seconds
                        log.warning(
                            "%s: lost the database connection (%s); reconnecting for up to %gs",
                            self.name,
                            said(exc),
                            self.postgres.retry_seconds,
                        )
                    await self._claim_again(deadline, exc)
        if sync:
            self.held.durable()
        self._unsynced = not sync

    async def _commit_held(self, sync: bool) -> None:
        conn = self.conn
        lacking = self.held.lacking(self.stored_seq)
        rows: BatchRows | None = None
        async with conn.transaction():
            if not sync:
                await conn.execute("SET LOCAL synchronous_commit TO off")
            if lacking:
                rows, checks = self.batch(lacking)
                await _insert_records(
                    conn, self.name, self.header.id, rows, self.stored_seq, self.epoch, checks
                )
            else:
                # Nothing new: a synchronous commit that writes flushes the WAL past every
                # earlier asynchronous one, and checks that the epoch is still this one.
                cur = await conn.execute(
                    "UPDATE acp_sessions SET epoch = epoch WHERE id = %s AND epoch = %s",
                    (self.header.id, self.epoch),
                )
                if cur.rowcount != 1:
                    raise StaleWriter(self.name, "another writer took the session over")
        if rows is not None:
            self.stored(rows)

    def _lost(self, exc: psycopg.Error) -> bool:
        """Whether `exc` says the connection, not the statement, failed: the server went away
        (a restart, a failover, the backend terminated) or is not a primary any more."""
        return self.conn.broken or self.conn.closed or (exc.sqlstate or "").startswith(_GONE)

    async def _claim_again(self, deadline: float, lost: psycopg.Error) -> None:
        """Connect again with backoff until `deadline`, take the session's lock and a new epoch
        (`StaleWriter` if another writer took it over meanwhile), and read the stored next
        seq, from which the held events are written again. Past the deadline
        `LogWriteFailed`, as a lost connection was before there was a retry."""
        await _closed(self.conn)
        why = said(lost)
        attempt = 0
        while (delay := retry_delay(attempt, deadline - anyio.current_time())) is not None:
            attempt += 1
            await anyio.sleep(delay)
            conn: AsyncConnection[Any] | None = None
            try:
                with anyio.fail_after(max(deadline - anyio.current_time(), 0.001)):
                    conn = await primary_connection(self.postgres.conninfo)
                    claimed = await self._claimed_on(conn)
            except TimeoutError:
                why = "timed out connecting"
                claimed = None
            except psycopg.Error as exc:
                why = said(exc)
                claimed = None
            except BaseException:
                if conn is not None:
                    await _closed(conn)
                raise
            if claimed is None or conn is None:
                if conn is not None:
                    await _closed(conn)
                continue
            self.conn, (self.epoch, self.stored_seq) = conn, claimed
            try:
                lacking = len(self.held.lacking(self.stored_seq))
            except NotHeld as exc:
                await self.close_now()  # this writer can never write it again: let it go
                if isinstance(exc, StoreAhead):
                    raise StaleWriter(self.name, str(exc)) from None
                self.failure = OSError(errno.EIO, str(exc))
                self._pending = []
                raise LogWriteFailed(self.name, self.failure) from None
            log.warning(
                "%s: reconnected and claimed the session again at seq %d: writing %d events again",
                self.name,
                self.stored_seq,
                lacking,
            )
            return
        self.failure = OSError(
            errno.ECONNRESET,
            f"{why} (reconnecting for {self.postgres.retry_seconds:g}s did not help)",
        )
        self._pending = []
        raise LogWriteFailed(self.name, self.failure)

    async def _claimed_on(self, conn: AsyncConnection[Any]) -> tuple[int, int] | None:
        """The session claimed again on `conn`: its new epoch and stored next seq. None while
        the lock is still held under this writer's epoch (the lost backend not yet ended)."""
        session_id = self.header.id
        cur = await conn.execute(f"SELECT pg_try_advisory_lock({LOCK_KEY})", lock_key(session_id))
        row = await cur.fetchone()
        if row is None or not row[0]:
            cur = await conn.execute("SELECT epoch FROM acp_sessions WHERE id = %s", (session_id,))
            row = await cur.fetchone()
            if row is None or row[0] != self.epoch:
                raise StaleWriter(self.name, "another writer took the session over")
            return None
        cur = await conn.execute(
            "UPDATE acp_sessions SET epoch = epoch + 1 WHERE id = %s AND epoch = %s "
            "RETURNING epoch, next_seq",
            (session_id, self.epoch),
        )
        row = await cur.fetchone()
        if row is None:
            await conn.execute(f"SELECT pg_advisory_unlock({LOCK_KEY})", lock_key(session_id))
            raise StaleWriter(self.name, "another writer took the session over")
        # The chunk checks are keyed by row: go on after the rows as stored (a lost commit's
        # rows included in none), and check no run left open across the loss.
        counted = await conn.execute(
            "SELECT count(*) FROM acp_records WHERE session = %s", (session_id,)
        )
        stored_rows = await counted.fetchone()
        assert stored_rows is not None
        self.restart(int(stored_rows[0]))
        return row[0], row[1]

    async def keep_checks(self, new: list[ChunkCheck], stale: list[int]) -> None:
        session_id = self.header.id
        try:
            async with self.conn.transaction(), self.conn.cursor() as many:
                if stale:
                    await many.executemany(_sql.drop_check, [(session_id, n) for n in stale])
                if new:
                    await many.executemany(_sql.keep_check, common.check_rows(session_id, new))
        except psycopg.Error as exc:
            log.warning("%s: chunk checks not kept: %s", self.name, said(exc))

    async def reopen(self, now_ms: int) -> Opened:
        """The connection may be gone, and the lock with it: the session is claimed anew."""
        with anyio.CancelScope(shield=True):
            await self.close_now()
        return await self.postgres.open(self.header.id, now_ms)

    async def close_now(self) -> None:
        """Give up the claim, writing nothing.

        The lock is released before the connection is closed: closing it would drop the lock
        too, but only once the server has ended that connection's backend, so a process that
        tried the lock right after this returned could still find it held.
        """
        self._closed = True
        with contextlib.suppress(psycopg.Error, OSError):
            await self.conn.execute(
                f"SELECT pg_advisory_unlock({LOCK_KEY})", lock_key(self.header.id)
            )
        with contextlib.suppress(psycopg.Error, OSError):
            await self.conn.close()


class PostgresHistory(common.SqlHistory[PostgresStore]):
    """The store API's `HistorySource` of one session in the database."""

    async def refresh(self) -> None:
        async with self.store.reading() as conn:
            cur = await conn.execute(_sql.next_seq, (self.header.id,))
            self.refreshed(await cur.fetchone())

    async def page(self, end: int, max_messages: int) -> tuple[PageCut, list[StorageRecord]]:
        async def read(conn: AsyncConnection[Any]) -> tuple[PageCut, list[StorageRecord]]:
            cur = await conn.execute(_sql.cuts, (self.header.id, end, max_messages))
            cuts = [cut for (cut,) in await cur.fetchall()]
            start = common.page_start(cuts, max_messages)
            return PageCut(start, end), await self._between(conn, start, end)

        return await self._on_standby(end, read)

    async def records(self, lo: int, hi: int) -> list[StorageRecord]:
        async def read(conn: AsyncConnection[Any]) -> list[StorageRecord]:
            return await self._between(conn, lo, hi)

        return await self._on_standby(hi, read)

    async def _on_standby(
        self, need: int, read: Callable[[AsyncConnection[Any]], Awaitable[T]]
    ) -> T:
        """`read` on a standby that holds the session up to seq `need`, else on the primary.
        What the session holds is always asked of the primary (`refresh`): only the reading
        of what it said is there goes to a standby."""
        standby = self.store.standby
        if standby is not None:
            found = await standby.session(self.header.id, need, read)
            if found is not None:
                return found
        async with self.store.reading() as conn:
            return await read(conn)

    async def _between(self, conn: AsyncConnection[Any], lo: int, hi: int) -> list[StorageRecord]:
        if lo >= hi:
            return []
        session_id = self.header.id
        cur = await conn.execute(_sql.between, (session_id, hi, session_id, lo))
        bodies = [body for (body,) in await cur.fetchall()]
        return common.records_between(self.store.where(session_id), bodies, lo, hi)

    async def has_child(self, child_id: str) -> bool:
        async with self.store.reading() as conn:
            cur = await conn.execute(_sql.has_child, (self.header.id, child_id))
            return await cur.fetchone() is not None


class StoredRows(common.CountedLines):
    """The `SessionLines` of a session read from the database (`PostgresStore.lines`)."""

    def __init__(self, path: str, lines: list[bytes]) -> None:
        super().__init__(path)
        self.lines = lines

    def __iter__(self) -> Iterator[bytes]:
        return map(self.counted, self.lines)
