"""What a PostgreSQL store holds beside its pool of readers: the keys of its writers' advisory
locks, its one listening connection and the followers' watches it wakes, and how a driver
error reads (one line; the `OSError` a writer's failure holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import struct
from typing import Any, Final

import anyio
import psycopg
from psycopg import AsyncConnection, errors, sql
from psycopg.abc import Buffer
from psycopg.adapt import Loader
from psycopg_pool import AsyncConnectionPool

from ...core.held_batches import MAX_DELAY_S, retry_delay

log = logging.getLogger(__name__)

CHANNEL: Final = "acp_appends"
"""The `LISTEN` channel: each committed batch notifies its session id."""
SAFETY_POLL_S: Final = 1.0
"""How often a follower looks for appends even without a notification."""

LOCK_KEY: Final = "%s::integer, %s::integer"
_LOCK_PERSON: Final = b"acp-server lock"


def lock_key(session_id: str) -> tuple[int, int]:
    """The two integer keys of a session's advisory lock: the halves of a 64-bit BLAKE2b digest
    of its id.

    An advisory lock is what a dead connection gives back by itself (its backend ends, its
    locks go), with no row to clean up after it; but its key holds 64 bits, not a whole id. The
    32 bits of `hashtext` let two ids of the same hash, found in under a second, refuse each
    other; two ids share a 64-bit digest with a chance of 2^-64 a pair, which is accepted here:
    they would refuse each other as "in use", never write each other's log (every append also
    checks the session's own epoch and next seq). A lock row keyed by the whole id would be
    exact, but only a transaction left open for as long as the session is written can hold a
    row lock, and the writer's connection commits each batch. The personalisation makes the keys
    this store's own: another application's two-integer locks on the database meet one only by
    the same chance. (A process of a build that keyed the lock by `hashtext` does not see these
    locks: against it, only the epoch keeps one writer, the later claim.)
    """
    digest = hashlib.blake2b(session_id.encode(), digest_size=8, person=_LOCK_PERSON).digest()
    high, low = struct.unpack(">ii", digest)
    return high, low


def said(exc: psycopg.Error) -> str:
    """What the driver said, on one line (libpq's connection errors take several)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


def os_error(exc: psycopg.Error) -> OSError:
    """A database failure as the OSError a writer's `failure` holds: a lost or refused
    connection is ECONNRESET (the request says the database is unavailable)."""
    if isinstance(exc, errors.DiskFull):
        number = errno.ENOSPC
    elif isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        number = errno.ECONNRESET
    else:
        number = errno.EIO
    return OSError(number, said(exc))


def _backoff(attempt: int) -> float:
    """How long the listening connection waits before reconnect `attempt`: doubling up to the
    writers' longest wait, for as long as anyone follows (it has no window to give up in)."""
    delay = retry_delay(attempt, MAX_DELAY_S)
    assert delay is not None
    return delay


async def primary_connection(conninfo: str) -> AsyncConnection[Any]:
    """A connection of its own to the primary, in autocommit mode: a writer's or the listening
    one. Of the hosts a URL may name, libpq takes the first that accepts writes, whatever the
    URL's own `target_session_attrs` (notifications are sent only on the primary, too)."""
    return await AsyncConnection.connect(
        conninfo, autocommit=True, target_session_attrs="read-write"
    )


class JsonBytes(Loader):
    """A `json` value as the bytes of its text, as stored (the store's only `json` columns
    hold its records and headers, read as JSON lines are: bytes, decoded by their reader).
    Cast to `text`, the server would copy it and the driver decode it, only for the reader to
    encode it again."""

    def load(self, data: Buffer) -> bytes:
        return bytes(data)


async def repeatable_reads(conn: AsyncConnection[Any]) -> None:
    """A pool's `configure` (the primary's and the standbys'): each borrowed connection reads
    in one snapshot, and its records' bodies as bytes (`JsonBytes`)."""
    await conn.set_isolation_level(psycopg.IsolationLevel.REPEATABLE_READ)
    conn.adapters.register_loader("json", JsonBytes)


def reading_pool(conninfo: str) -> AsyncConnectionPool[AsyncConnection[Any]]:
    """A pool of short-lived reads (the primary's, or the standbys'), not yet opened: each
    connection checked before it is lent, and set up by `repeatable_reads`."""
    return AsyncConnectionPool(
        conninfo,
        min_size=1,
        max_size=4,
        open=False,
        configure=repeatable_reads,
        check=AsyncConnectionPool.check_connection,
    )


class PostgresWatch:
    """One follower's wake-ups: set by a notification for its session (or a reconnect)."""

    def __init__(self, listener: Listener, session_id: str) -> None:
        self.listener = listener
        self.session_id = session_id
        self._woken = anyio.Event()
        # Woken from the start: the first wait is the catch-up read of what was appended
        # between the follower's snapshot and this registration.
        self._woken.set()

    def wake(self) -> None:
        self._woken.set()

    async def wait(self, poll: float) -> None:
        """Until a notification since the last wait, or the safety poll (`poll` is for the
        engines that only poll)."""
        with anyio.move_on_after(SAFETY_POLL_S):
            await self._woken.wait()
        self._woken = anyio.Event()

    def close(self) -> None:
        self.listener.forget(self)


class Listener:
    """The store's one `LISTEN` connection, run by a task of its own while anyone watches."""

    def __init__(self, conninfo: str, url: str) -> None:
        self.conninfo = conninfo
        self.url = url
        self.watches: dict[str, set[PostgresWatch]] = {}
        self._task: asyncio.Task[None] | None = None
        self.listening = anyio.Event()
        """Set once the connection listens (tests wait for it before counting on a wake)."""
        self.listening_at: str | None = None
        """The `host:port` of the server it listens on now (after a failover: the new
        primary's, as its conninfo asks for a read-write host); None while it is not."""

    def watch(self, session_id: str) -> PostgresWatch:
        watch = PostgresWatch(self, session_id)
        self.watches.setdefault(session_id, set()).add(watch)
        if self._task is None:
            # psycopg's async connections run on asyncio: so does this engine's listener.
            self._task = asyncio.get_running_loop().create_task(self._run())
        return watch

    def forget(self, watch: PostgresWatch) -> None:
        watches = self.watches.get(watch.session_id)
        if watches is not None:
            watches.discard(watch)
            if not watches:
                del self.watches[watch.session_id]

    def _wake_all(self) -> None:
        for watches in self.watches.values():
            for watch in watches:
                watch.wake()

    async def _run(self) -> None:
        attempt = 0  # reconnects since the connection last listened: they back off
        failed = False
        while True:
            try:
                conn = await primary_connection(self.conninfo)
            except psycopg.Error as exc:
                # Said once per outage: a failover can take a while.
                (log.debug if failed else log.warning)(
                    "%s: cannot listen for appends: %s", self.url, said(exc)
                )
                failed = True
                await asyncio.sleep(_backoff(attempt))
                attempt += 1
                continue
            failed = False
            try:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
                self.listening_at = f"{conn.info.host}:{conn.info.port}"
                log.info("%s: listening for appends at %s", self.url, self.listening_at)
                self.listening.set()
                attempt = 0
                self._wake_all()  # what was notified while not listening is read by seq
                async for note in conn.notifies():
                    for watch in self.watches.get(note.payload, ()):
                        watch.wake()
            except psycopg.Error as exc:
                log.warning("%s: lost the listening connection: %s", self.url, said(exc))
            finally:
                self.listening_at = None
                with contextlib.suppress(psycopg.Error, OSError):
                    await conn.close()
            self._wake_all()
            await asyncio.sleep(_backoff(attempt))
            attempt += 1

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
