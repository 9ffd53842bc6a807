"""A turn that streams through its database going away (SPEC 2.6, docs/postgres.md): the whole
server restarted or the writer's connection killed mid-turn, the writer reconnects within
`--store-retry`, claims the session again and writes what the store lacks; the turn completes,
the stored log is gapless and holds exactly what the client was shown, and a follower in
another process gets every event once. Past the window the turn fails as before.

The tests of a whole turn run against a cluster of this module's own, which they stop and
start; those of the store's writer alone against the shared server, ending its connection."""

from __future__ import annotations

import errno
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from fixtures_builder import Scenario, Step, write_fixture
from postgres_server import (
    Cluster,
    StandbyPair,
    StopMode,
    debian_binaries,
    fresh_database,
    server_binaries,
)
from strategies import streamed_turn
from unavailable import unavailable

from acp_server.client import AcpClient, RpcError, session_address
from acp_server.core.events import (
    AssistantChunk,
    SessionEvent,
    TurnEnd,
    TurnEndReasonCompleted,
    TurnEndReasonInterrupted,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.stream import TextDelta
from acp_server.storage.errors import LogWriteFailed, StaleWriter
from acp_server.storage.sql.postgres import PostgresStore
from acp_server.storage.url import open_store, parse_store_url

pytestmark = [pytest.mark.anyio, pytest.mark.process]

TIMEOUT = 120
OUTAGE_AT = 100
"""The seq a follower must have seen before the database goes away: chunks are stored, more
are to come."""
RECONNECTED = "reconnected and claimed the session again"
"""What the writer's process logs once it has the session again (the outage met a write)."""


def words(count: int) -> str:
    return " ".join(f"word{k % 13}" for k in range(count))


STREAM = Scenario([("stream", [Step(text=words(600))]), ("again", [Step(text="Done.")])])


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A cluster these tests may stop and start (never the one the other tests share)."""
    binaries = server_binaries()
    if binaries is None:
        unavailable("no PostgreSQL server binaries: these tests restart a server of their own")
    cluster = Cluster(binaries)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def url(cluster: Cluster) -> str:
    return fresh_database(cluster.url)


def spawn(tmp_path: Path, url: str, *flags: str) -> Any:
    fixture = write_fixture(tmp_path / "fixture", STREAM)
    # Titles off: the follower ends at the turn's end, and is held to the turn's log.
    return AcpClient.spawn("--store", url, "--replay", str(fixture), "--titles", "off", *flags)


async def stored_events(url: str, session_id: str) -> list[SessionEvent]:
    store = open_store(parse_store_url(url))
    try:
        return (await store.read(session_id)).events
    finally:
        await store.aclose()


def shown_text(updates: list[Any]) -> list[str]:
    """The agent's message chunks a client was shown, in order."""
    return [
        update["content"]["text"]
        for update in updates
        if update["sessionUpdate"] == "agent_message_chunk"
    ]


def stored_text(log: list[SessionEvent]) -> list[str]:
    """The text deltas the log holds, in order."""
    return [
        event.data.chunk.text
        for event in log
        if type(event) is AssistantChunk and type(event.data.chunk) is TextDelta
    ]


def sql(url: str, statement: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement.encode(), params)
        return cur.fetchall() if cur.description else []


def terminate_writer(url: str) -> None:
    """End the backend of the connection holding a session's advisory lock in `url`'s
    database (the writer's), as a network failure or an administrator would."""
    ended = sql(
        url,
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    assert ended == [(True,)]


async def streamed_through(tmp_path: Path, url: str, outage: Any) -> None:
    """A turn streamed while `outage()` takes the database away and gives it back, after the
    follower in another process has seen `OUTAGE_AT`: it completes, the log is gapless and
    is what the client was shown and the follower got, each event once."""
    (tmp_path / "workspace").mkdir()
    shown: list[Any] = []
    seen: list[SessionEvent] = []
    with anyio.fail_after(TIMEOUT):
        async with (
            spawn(tmp_path, url, "--pace-ms", "10") as writer,
            spawn(tmp_path, url) as reader,
        ):
            await writer.initialize()
            await reader.initialize()
            session = await writer.new_session(tmp_path / "workspace")
            follow = await reader.follow(session_address(session))
            stop_reason: list[str] = []
            async with anyio.create_task_group() as tasks:

                async def prompt() -> None:
                    stop_reason.append(await writer.prompt(session, "stream", shown.append))

                tasks.start_soon(prompt)
                async for event in follow:
                    seen.append(event)
                    if event.seq == OUTAGE_AT:
                        tasks.start_soon(anyio.to_thread.run_sync, outage)
                    if type(event) is TurnEnd:
                        break
            await follow.aclose()
            assert RECONNECTED in writer.stderr
    log = await stored_events(url, session)
    assert stop_reason == ["end_turn"]
    assert [e.seq for e in log] == list(range(len(log)))
    assert type(log[-1]) is TurnEnd
    assert log[-1].data.reason == TurnEndReasonCompleted()
    assert shown_text(shown) == stored_text(log)
    assert "".join(stored_text(log)) == words(600)
    assert seen == log


@pytest.mark.parametrize("mode", ["fast", "immediate"])
async def test_a_turn_streams_through_a_restart_of_the_whole_server(
    tmp_path: Path, cluster: Cluster, url: str, mode: StopMode
) -> None:
    """`fast`: the server ends every session and shuts down cleanly; `immediate`: as a crash,
    the asynchronous commits not yet on disk are lost and written again."""
    await streamed_through(tmp_path, url, lambda: cluster.restart(mode))


async def test_a_turn_streams_through_its_connection_killed(tmp_path: Path, url: str) -> None:
    await streamed_through(tmp_path, url, lambda: terminate_writer(url))


@pytest.fixture
def synchronous_pair() -> Iterator[StandbyPair]:
    """A primary and a synchronous standby of this test's own (every synchronous commit is on
    the standby before it returns), to promote."""
    binaries = debian_binaries()
    if binaries is None:
        unavailable("no PostgreSQL server directory with initdb, pg_ctl and pg_basebackup")
    pair = StandbyPair(binaries, synchronous=True)
    try:
        pair.start()
        yield pair
    finally:
        pair.stop()


async def test_a_turn_streams_through_its_primary_killed_and_the_standby_promoted(
    tmp_path: Path, synchronous_pair: StandbyPair
) -> None:
    """At a multi-host URL that asks for the primary: the writer finds the promoted standby,
    which has every synchronous commit, and writes again what it lacks."""
    pair = synchronous_pair
    name = fresh_database(pair.primary.url).rpartition("/")[2]
    base = pair.url.rpartition("/")[0]
    url = f"{base}/{name}?target_session_attrs=read-write"
    pair.wait_in_step()  # the new database is on the standby

    def failover() -> None:
        pair.stop_primary("immediate")
        pair.promote()

    await streamed_through(tmp_path, url, failover)
    assert sql(url, "SELECT inet_server_port()") == [(pair.standby.port,)]


async def test_a_server_down_past_the_retry_window_fails_the_turn_as_before(
    tmp_path: Path, cluster: Cluster, url: str
) -> None:
    """Down for longer than `--store-retry 1`: the turn fails saying the database is
    unavailable; once it is back the next prompt continues the session, the first turn closed
    by recovery, gapless."""
    (tmp_path / "workspace").mkdir()
    with anyio.fail_after(TIMEOUT):
        async with (
            spawn(tmp_path, url, "--pace-ms", "10", "--store-retry", "1") as writer,
            spawn(tmp_path, url) as reader,
        ):
            await writer.initialize()
            await reader.initialize()
            session = await writer.new_session(tmp_path / "workspace")
            follow = await reader.follow(session_address(session))
            failed: list[RpcError] = []
            async with anyio.create_task_group() as tasks:

                async def prompt() -> None:
                    with pytest.raises(RpcError) as error:
                        await writer.prompt(session, "stream")
                    failed.append(error.value)

                tasks.start_soon(prompt)
                async for event in follow:
                    if event.seq == OUTAGE_AT:
                        break
                await follow.aclose()
                await anyio.to_thread.run_sync(cluster.stop_server, "fast")
            # The prompt failed while the server was down: only now does it come back.
            await anyio.to_thread.run_sync(cluster.run_server)
            assert (failed[0].code, failed[0].message, failed[0].data["reason"]) == (
                -32013,
                "Storage failure: the connection to the store's database was lost (ECONNRESET) "
                "while writing the session log",
                "database-unavailable",
            )
            assert "reconnecting for 1s did not help" in writer.stderr
            assert await writer.prompt(session, "again") == "end_turn"
    log = await stored_events(url, session)
    ends = [e for e in log if type(e) is TurnEnd]
    assert [e.data.reason for e in ends] == [TurnEndReasonInterrupted(), TurnEndReasonCompleted()]
    assert [e.seq for e in log] == list(range(len(log)))


# -- the writer alone ----------------------------------------------------------------------------

FIRST = streamed_turn(0, 0, 5)
"""Seqs 0 to 12: a turn made durable before the connection is lost."""
SECOND = streamed_turn(1, len(FIRST), 20)
"""Seqs 13 to 40: the turn that streams through it."""
EVENTS = FIRST + SECOND
LATE = len(FIRST) + 10
"""Where the second turn's batch written after the connection was lost starts."""


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(postgres_url, retry_seconds=TIMEOUT)
    try:
        yield opened
    finally:
        await opened.aclose()


async def written_through_a_lost_connection(store: PostgresStore, lose: Any) -> None:
    """The first turn synced, the second's first batch flushed, the connection lost (and
    `lose()` done while it is), then the rest of the turn written and the session closed."""
    writer = await store.create(
        SessionHeader(version=SESSION_FORMAT_VERSION, id="s1", created_at=0, cwd="/work")
    )
    writer.append(FIRST)
    await writer.sync()
    writer.append(EVENTS[len(FIRST) : LATE])
    await writer.flush()
    terminate_writer(store.conninfo)
    lose()
    writer.append(EVENTS[LATE:])
    await writer.flush()
    await writer.close()


async def test_a_writer_whose_connection_was_killed_writes_only_what_the_store_lacks(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        await written_through_a_lost_connection(store, lambda: None)
    assert (await store.read("s1")).events == EVENTS
    assert f"claimed the session again at seq {LATE}: writing {len(EVENTS) - LATE} events" in (
        caplog.text
    )


async def test_a_flush_the_database_lost_is_written_again(
    store: PostgresStore, caplog: pytest.LogCaptureFixture
) -> None:
    """The second turn's first batch, committed asynchronously, is gone when the writer is
    back (as after a crash or a failover): it is written again with the rest."""

    def lost() -> None:
        url = store.conninfo
        sql(url, "DELETE FROM acp_records WHERE seq0 >= %s", len(FIRST))
        sql(url, "DELETE FROM acp_messages WHERE seq >= %s", len(FIRST))
        sql(url, "UPDATE acp_sessions SET next_seq = %s", len(FIRST))

    with caplog.at_level(logging.WARNING):
        await written_through_a_lost_connection(store, lost)
    assert (await store.read("s1")).events == EVENTS
    assert f"at seq {len(FIRST)}: writing {len(SECOND)} events again" in caplog.text


async def test_a_session_taken_over_while_the_connection_was_lost_is_not_written(
    store: PostgresStore,
) -> None:
    def taken_over() -> None:
        sql(store.conninfo, "UPDATE acp_sessions SET epoch = epoch + 1")

    with pytest.raises(StaleWriter, match="another writer took the session over"):
        await written_through_a_lost_connection(store, taken_over)
    assert (await store.read("s1")).events == EVENTS[:LATE]


async def test_a_database_that_lost_a_durable_commit_fails_the_write(
    store: PostgresStore,
) -> None:
    """The first turn was committed synchronously and let go of: a store that lost it (a
    failover to a standby that was not synchronous) cannot be made whole from memory."""

    def lost() -> None:
        url = store.conninfo
        sql(url, "DELETE FROM acp_records WHERE seq0 >= 5")
        sql(url, "DELETE FROM acp_messages WHERE seq >= 5")
        sql(url, "UPDATE acp_sessions SET next_seq = 5")

    with pytest.raises(LogWriteFailed) as failed:
        await written_through_a_lost_connection(store, lost)
    assert (failed.value.cause.errno, failed.value.cause.strerror) == (
        errno.EIO,
        f"the store's next seq is 5, short of the {len(FIRST)} committed durably",
    )


async def test_a_writer_reaches_the_primary_whichever_host_a_url_names_first(
    postgres_pair: StandbyPair,
) -> None:
    """The standby first and no `target_session_attrs`: the writer's connection and the
    listening one are the primary's, and the session is written there."""
    pair = postgres_pair
    name = fresh_database(pair.primary.url).rpartition("/")[2]
    pair.wait_in_step()
    hosts = f"127.0.0.1:{pair.standby.port},127.0.0.1:{pair.primary.port}"
    store = PostgresStore(f"postgresql://postgres@{hosts}/{name}")
    primary = f"{pair.primary.url.rpartition('/')[0]}/{name}"
    try:
        watch = store.watch("s1")
        assert store._listener is not None
        with anyio.fail_after(TIMEOUT):
            await store._listener.listening.wait()
        writer = await store.create(
            SessionHeader(version=SESSION_FORMAT_VERSION, id="s1", created_at=0, cwd="/work")
        )
        writer.append(FIRST)
        await writer.sync()
        on_primary = sql(
            primary,
            "SELECT (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'), "
            "(SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%%')",
        )
        await writer.close()
        watch.close()
    finally:
        await store.aclose()
    assert on_primary == [(1, 1)]
    assert sql(primary, "SELECT next_seq FROM acp_sessions") == [(len(FIRST),)]
