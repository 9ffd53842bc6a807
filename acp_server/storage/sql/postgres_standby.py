"""Where a PostgreSQL store's connections go when its database has standbys (SPEC 2.6).

A store URL may name several hosts (libpq's `host=a,b`, `postgresql://a:5432,b:5432/db`):
writers must reach the primary, so their conninfo asks for `target_session_attrs=read-write`
when the URL names several hosts and says nothing of it (`writer_conninfo`). After a failover
every new connection (a writer's, the pool's, the listener's) finds whichever host is the
primary now.

`--store-read URL` names where what only reads may go (`StandbyReads`): a page, the records a
follower catches up on, a whole session read without writing it, `session/list`. Its
connections ask for `target_session_attrs=prefer-standby` and a short `connect_timeout`. A
standby replays the primary's commits a little later, so each read first checks that the
standby holds what the reader needs, in the same snapshot as the read itself: a session's
stored next seq at least the seq the reader needs (the primary said how far the session goes),
or, for a list, a replay position at least the primary's WAL insert position when the list was
asked for. A standby that is behind, or that cannot be reached (skipped for `SKIP_S` after a
failure), leaves the read to the primary: `None` from a read here means "ask the primary".

Notifications are never delivered on a standby: followers are woken by the primary's `LISTEN`
connection (`postgres_links.Listener`), which reconnects to whichever host is read-write.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final, TypeVar

import anyio
import psycopg
from psycopg import AsyncConnection
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool

from ..redact import redact_url
from .postgres_links import reading_pool, said

log = logging.getLogger(__name__)

T = TypeVar("T")

CONNECT_TIMEOUT_S: Final = 2
"""libpq's `connect_timeout` for a standby (2 is the least it honours): an unreachable standby
delays a read by about this much before the primary takes it."""
SKIP_S: Final = 5.0
"""How long a standby that could not be reached is left alone: the primary takes its reads."""
_WRITER_ATTRS: Final = "read-write"
_READER_ATTRS: Final = "prefer-standby"
_SESSION_NEXT_SEQ: Final = "SELECT next_seq FROM acp_sessions WHERE id = %s"
_REPLAYED: Final = "SELECT NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= %s::pg_lsn"
PRIMARY_POSITION: Final = "SELECT pg_current_wal_insert_lsn()::text"
"""What a list needs a standby to have replayed: the primary's WAL insert position, read on
the primary before the list (every commit before it is at or before that position)."""


def _params(conninfo: str) -> dict[str, Any] | None:
    try:
        return conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError:
        return None  # connecting says what is wrong with it


def several_hosts(conninfo: str) -> bool:
    """Whether `conninfo` (a URL or a libpq string) names more than one host."""
    params = _params(conninfo) or {}
    return any("," in str(params.get(key, "")) for key in ("host", "hostaddr"))


def writer_conninfo(conninfo: str) -> str:
    """`conninfo` as writers connect with it: asking for the primary when it names several
    hosts and no `target_session_attrs` of its own."""
    params = _params(conninfo)
    if params is None or "target_session_attrs" in params or not several_hosts(conninfo):
        return conninfo
    return make_conninfo(conninfo, target_session_attrs=_WRITER_ATTRS)


def reader_conninfo(conninfo: str) -> str:
    """`--store-read`'s conninfo as the standbys' reads connect with it: a standby preferred,
    a short connect timeout, unless the URL says otherwise."""
    params = _params(conninfo)
    if params is None:
        return conninfo
    extra: dict[str, Any] = {}
    if "target_session_attrs" not in params:
        extra["target_session_attrs"] = _READER_ATTRS
    if "connect_timeout" not in params:
        extra["connect_timeout"] = CONNECT_TIMEOUT_S
    return make_conninfo(conninfo, **extra) if extra else conninfo


class StandbyReads:
    """The reads a store sends to its standbys (`--store-read`), each checked to be in step.

    `counts` says how each read went: "standby" (served there), "behind" (the standby lacked
    what the reader needed), "unreachable" (it could not be asked, or was being skipped),
    "failed" (it cancelled the query): all but the first were left to the primary.
    """

    def __init__(self, conninfo: str) -> None:
        self.conninfo = reader_conninfo(conninfo)
        self.shown = redact_url(conninfo)
        self.counts: collections.Counter[str] = collections.Counter()
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._opening = anyio.Lock()
        self._skip_until = 0.0

    async def session(
        self, session_id: str, need: int, read: Callable[[AsyncConnection[Any]], Awaitable[T]]
    ) -> T | None:
        """`read` on a standby whose copy of the session goes at least to `need` (its stored
        next seq), in the same snapshot; None: the primary must read it."""

        async def ready(conn: AsyncConnection[Any]) -> bool:
            cur = await conn.execute(_SESSION_NEXT_SEQ, (session_id,))
            row = await cur.fetchone()
            return row is not None and row[0] >= need

        return await self._read(ready, read, f"session {session_id} through seq {need - 1}")

    async def listing(
        self, position: str, read: Callable[[AsyncConnection[Any]], Awaitable[T]]
    ) -> T | None:
        """`read` on a standby that has replayed the primary's WAL up to `position` (read on
        the primary, `PRIMARY_POSITION`), in the same snapshot; None: the primary must."""

        async def ready(conn: AsyncConnection[Any]) -> bool:
            cur = await conn.execute(_REPLAYED, (position,))
            row = await cur.fetchone()
            return row is not None and row[0] is True

        return await self._read(ready, read, f"the session list as of WAL {position}")

    async def _read(
        self,
        ready: Callable[[AsyncConnection[Any]], Awaitable[bool]],
        read: Callable[[AsyncConnection[Any]], Awaitable[T]],
        what: str,
    ) -> T | None:
        if time.monotonic() < self._skip_until:
            self.counts["unreachable"] += 1
            return None
        try:
            async with self._connection() as conn:
                if not await ready(conn):
                    self.counts["behind"] += 1
                    log.debug(
                        "%s: the standby is behind for %s: read on the primary", self.shown, what
                    )
                    return None
                result = await read(conn)
        except psycopg.errors.UndefinedTable:
            # The standby has not replayed the tables' creation yet.
            self.counts["behind"] += 1
            return None
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            # Refused, timed out (`PoolTimeout` is one), or lost on the way.
            self.counts["unreachable"] += 1
            self._skip_until = time.monotonic() + SKIP_S
            log.warning(
                "%s: cannot read from the standby, the primary reads for %g s: %s",
                self.shown,
                SKIP_S,
                said(exc),
            )
            return None
        except psycopg.Error as exc:
            # A query a hot standby cancelled (a conflict with the recovery it replays): this
            # read goes to the primary, the next one may come here again.
            self.counts["failed"] += 1
            log.info("%s: the standby could not serve %s: %s", self.shown, what, said(exc))
            return None
        self.counts["standby"] += 1
        log.debug("%s: the standby served %s", self.shown, what)
        return result

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        """A pooled connection to a standby, in one repeatable-read transaction."""
        async with self._opening:
            if self._pool is None:
                pool: AsyncConnectionPool[AsyncConnection[Any]] = reading_pool(self.conninfo)
                await pool.open()
                self._pool = pool
        async with self._pool.connection(timeout=CONNECT_TIMEOUT_S + 1) as conn:
            yield conn

    async def aclose(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
