"""Reading from standbys and failing over (SPEC 2.6), against a real primary and a streaming
standby (`postgres_pair`): the fixture itself first, then the store's reads and its writers."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec
import psycopg
import pytest
from fixtures_builder import Scenario, Step, write_fixture
from polling import wait_for
from postgres_server import StandbyPair, debian_binaries
from test_store_contract import WRITER_PROCESS, after_turn, conversation, header, stored
from test_store_server import words
from unavailable import unavailable

from acp_server.client import AcpClient, session_address
from acp_server.core.chunk_rows import decode_storage_record
from acp_server.core.events import AssistantMessageEvent, SessionEvent, TurnEnd
from acp_server.storage.api import follow_stored
from acp_server.storage.sql import postgres_links
from acp_server.storage.sql.postgres import PostgresStore, PostgresWriter

pytestmark = [pytest.mark.process, pytest.mark.anyio]


def _one(url: str, statement: str) -> object:
    """The first column of the first row `statement` returns (None when it returns none)."""
    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        row = cur.fetchone() if cur.description else None
    return None if row is None else row[0]


def test_the_standby_replays_what_the_primary_commits(postgres_pair: StandbyPair) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t AS SELECT 7 AS v")
    postgres_pair.wait_in_step()
    assert _one(postgres_pair.standby.url, "SELECT v FROM t") == 7
    assert _one(postgres_pair.standby.url, "SELECT pg_is_in_recovery()") is True


def test_a_paused_standby_lags_until_resumed(postgres_pair: StandbyPair) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t (v integer)")
    postgres_pair.wait_in_step()
    postgres_pair.pause_replay()
    _one(postgres_pair.primary.url, "INSERT INTO t VALUES (1) RETURNING v")
    assert _one(postgres_pair.standby.url, "SELECT count(*) FROM t") == 0
    postgres_pair.resume_replay()
    postgres_pair.wait_in_step()
    assert _one(postgres_pair.standby.url, "SELECT count(*) FROM t") == 1


def test_restarted_servers_stream_again(postgres_pair: StandbyPair) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t (v integer)")
    postgres_pair.restart_primary("immediate")
    postgres_pair.restart_standby("fast")
    postgres_pair.wait_streaming()
    _one(postgres_pair.primary.url, "INSERT INTO t VALUES (5)")
    postgres_pair.wait_in_step()
    assert _one(postgres_pair.standby.url, "SELECT sum(v) FROM t") == 5


def test_a_synchronous_pair_waits_for_its_standby() -> None:
    binaries = debian_binaries()
    if binaries is None:
        unavailable("no Debian PostgreSQL server directory (see the postgres_pair fixture)")
    pair = StandbyPair(binaries, synchronous=True)
    try:
        pair.start()
        assert _one(pair.primary.url, "SELECT sync_state FROM pg_stat_replication") == "sync"
    finally:
        pair.stop()


def test_a_promoted_standby_takes_writes_at_the_multi_host_url(
    postgres_pair: StandbyPair,
) -> None:
    _one(postgres_pair.primary.url, "CREATE TABLE t AS SELECT 1 AS v")
    postgres_pair.wait_in_step()
    postgres_pair.stop_primary("immediate")
    postgres_pair.promote()
    writer = f"{postgres_pair.url}?target_session_attrs=read-write"
    _one(writer, "INSERT INTO t VALUES (2) RETURNING v")
    assert _one(writer, "SELECT sum(v) FROM t") == 3
    assert _one(writer, "SELECT inet_server_port()") == postgres_pair.standby.port


# -- the store's reads and writers --------------------------------------------------------------


LAST_ANSWER = 12
"""Where the last message of `conversation(2)` starts: the first chunk of its last answer."""


def standby_store(pair: StandbyPair) -> PostgresStore:
    """A store whose writers use both hosts' URL and whose reads go to the standby first."""
    return PostgresStore(pair.url, read_url=pair.standby.url)


async def read_everything(
    store: PostgresStore,
) -> tuple[list[SessionEvent], list[SessionEvent], list[SessionEvent], list[str]]:
    """Session "s1" read each way a reader reads it: a page of its last message, a range, the
    whole log; and the ids `session/list` shows."""
    source = await store.history("s1")
    end = source.last_seq + 1
    _, page = await source.page(end, 1)
    ranged = await source.records(0, end)
    whole = await store.read("s1")
    listed = [item.header.id for item in await store.list_sessions()]
    return (
        [e for record in page for e in decode_storage_record(record)],
        [e for record in ranged for e in decode_storage_record(record)],
        whole.events,
        listed,
    )


async def test_reads_are_served_by_the_standby_while_it_is_in_step(
    postgres_pair: StandbyPair,
) -> None:
    store = standby_store(postgres_pair)
    events = conversation(2)
    await stored(store, events)
    await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
    page, ranged, whole, listed = await read_everything(store)
    assert page == events[LAST_ANSWER:]
    assert (ranged, whole, listed) == (events, events, ["s1"])
    assert store.standby is not None
    assert store.standby.counts == {"standby": 4}
    await store.aclose()


async def test_a_lagging_standby_leaves_reads_to_the_primary_which_has_the_newest_data(
    postgres_pair: StandbyPair,
) -> None:
    store = standby_store(postgres_pair)
    events = conversation(2)
    cut = after_turn(events, 0)
    await stored(store, events[:cut])
    await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
    await anyio.to_thread.run_sync(postgres_pair.pause_replay)
    writer = (await store.open("s1", 0)).writer
    writer.append(events[cut:])
    await writer.close()
    page, ranged, whole, listed = await read_everything(store)
    assert (page, ranged, whole, listed) == (events[LAST_ANSWER:], events, events, ["s1"])
    assert store.standby is not None
    assert store.standby.counts == {"behind": 4}
    await anyio.to_thread.run_sync(postgres_pair.resume_replay)
    await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
    assert await read_everything(store) == (events[LAST_ANSWER:], events, events, ["s1"])
    assert store.standby.counts == {"behind": 4, "standby": 4}
    await store.aclose()


async def test_an_unreachable_standby_leaves_reads_to_the_primary(
    postgres_pair: StandbyPair,
) -> None:
    store = standby_store(postgres_pair)
    events = conversation(2)
    await stored(store, events)
    await anyio.to_thread.run_sync(postgres_pair.standby.stop_server, "immediate")
    page, ranged, whole, listed = await read_everything(store)
    assert page == events[LAST_ANSWER:]
    assert (ranged, whole, listed) == (events, events, ["s1"])
    assert store.standby is not None
    # The first read waits for the standby's connection and fails; the others skip it.
    assert store.standby.counts == {"unreachable": 4}
    await store.aclose()


async def test_a_writer_at_a_url_of_several_hosts_reaches_the_primary_whichever_comes_first(
    postgres_pair: StandbyPair,
) -> None:
    standby_first = (
        "postgresql://postgres@"
        f"127.0.0.1:{postgres_pair.standby.port},127.0.0.1:{postgres_pair.primary.port}/postgres"
    )
    store = PostgresStore(standby_first)
    writer = await store.create(header())
    assert isinstance(writer, PostgresWriter)
    cur = await writer.conn.execute("SELECT inet_server_port()")
    assert await cur.fetchone() == (postgres_pair.primary.port,)
    await writer.close()
    await store.aclose()


async def test_a_password_in_the_standbys_url_is_never_logged(
    postgres_pair: StandbyPair, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = PostgresStore(
        postgres_pair.url,
        read_url=f"postgresql://postgres:s3cret@127.0.0.1:{postgres_pair.standby.port}/postgres",
    )
    await stored(store, conversation(1))
    await anyio.to_thread.run_sync(postgres_pair.standby.stop_server, "immediate")
    await store.read("s1")
    await store.aclose()
    assert "cannot read from the standby" in caplog.text
    assert "postgres:***@127.0.0.1" in caplog.text
    assert "s3cret" not in caplog.text


async def test_after_a_promotion_a_new_writer_reaches_the_new_primary_and_a_follower_keeps_following(
    postgres_pair: StandbyPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follower is woken by notifications only (the safety poll is an hour long): the
    appends after the failover reach it through its listening connection, re-established on
    the promoted standby. The writers are processes of their own, given both hosts' URL."""
    monkeypatch.setattr(postgres_links, "SAFETY_POLL_S", 3600.0)
    parks = 0
    wait = postgres_links.PostgresWatch.wait

    async def counted_wait(watch: postgres_links.PostgresWatch, poll: float) -> None:
        nonlocal parks
        if not watch._woken.is_set():
            parks += 1  # the follower has read all there is: only a wake-up brings more
        await wait(watch, poll)

    monkeypatch.setattr(postgres_links.PostgresWatch, "wait", counted_wait)
    store = standby_store(postgres_pair)
    events = conversation(3)
    first, second = after_turn(events, 0), after_turn(events, 1)
    await stored(store, events[:first])
    received: list[SessionEvent] = []
    arrived = anyio.Event()

    async def follow() -> None:
        async for batch in follow_stored(store, "s1", first):
            received.extend(batch)
            if received[-1].seq in (second - 1, events[-1].seq):
                arrived.set()

    async def parked_after(count: int) -> None:
        await wait_for(lambda: parks > count)

    async def listening_at(port: int) -> None:
        assert store._listener is not None
        await wait_for(
            lambda: (
                store._listener is not None and store._listener.listening_at == f"127.0.0.1:{port}"
            )
        )

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(follow)
            await wait_for(lambda: store._listener is not None)
            await listening_at(postgres_pair.primary.port)
            await parked_after(0)
            await write_in_process(postgres_pair.url, events[first:second])
            await arrived.wait()
            arrived = anyio.Event()
            await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
            await anyio.to_thread.run_sync(postgres_pair.stop_primary, "immediate")
            await anyio.to_thread.run_sync(postgres_pair.promote)
            await listening_at(postgres_pair.standby.port)
            await parked_after(parks)
            await write_in_process(postgres_pair.url, events[second:])
            await arrived.wait()
            tasks.cancel_scope.cancel()
    assert received == events[first:]
    await store.aclose()


async def write_in_process(url: str, events: list[SessionEvent]) -> None:
    """Append `events` to session "s1" from a process of its own, opening it at `url`."""
    done = await anyio.run_process(
        [sys.executable, "-c", WRITER_PROCESS, url],
        input=msgspec.json.encode(events),
        stderr=subprocess.PIPE,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()


# -- through the wire ---------------------------------------------------------------------------

STREAM = Scenario([("stream", [Step(text=words(300))]), ("again", [Step(text="Done.")])])


def spawn(tmp_path: Path, url: str, *flags: str) -> Any:
    fixture = write_fixture(tmp_path / "fixture", STREAM)
    # Titles off: the follower is held to the turns' log, nothing written after them.
    return AcpClient.spawn("--store", url, "--replay", str(fixture), "--titles", "off", *flags)


async def test_a_follower_in_another_server_keeps_following_through_a_failover(
    tmp_path: Path, postgres_pair: StandbyPair
) -> None:
    """A server follows a session (reading from the standby) that another server writes; the
    primary is killed and the standby promoted; a third server loads the session at the same
    URL of both hosts and prompts again: the follower sees every event of both turns, exactly
    what the new primary stores."""
    url, standby = postgres_pair.url, postgres_pair.standby.url
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    seen: list[SessionEvent] = []
    with anyio.fail_after(180):
        async with spawn(tmp_path, url, "--store-read", standby) as reader:
            await reader.initialize()
            async with spawn(tmp_path, url, "--pace-ms", "1") as writer:
                await writer.initialize()
                session = await writer.new_session(workspace)
                follow = await reader.follow(session_address(session))
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(writer.prompt, session, "stream")
                    async for event in follow:
                        seen.append(event)
                        if type(event) is TurnEnd:
                            break
            await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
            await anyio.to_thread.run_sync(postgres_pair.stop_primary, "immediate")
            await anyio.to_thread.run_sync(postgres_pair.promote)
            async with spawn(tmp_path, url) as again:
                await again.initialize()
                await again.load_session(session, workspace)
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(again.prompt, session, "again")
                    async for event in follow:
                        seen.append(event)
                        if type(event) is TurnEnd:
                            break
            await follow.aclose()
    store = PostgresStore(postgres_pair.standby.url)
    log = (await store.read(session)).events
    await store.aclose()
    assert [type(e) for e in log].count(TurnEnd) == 2
    assert seen == log


async def test_a_server_given_standbys_pages_and_lists_from_the_standby_in_step(
    tmp_path: Path, postgres_pair: StandbyPair
) -> None:
    url, standby = postgres_pair.url, postgres_pair.standby.url
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    with anyio.fail_after(120):
        async with spawn(tmp_path, url) as writer:
            await writer.initialize()
            session = await writer.new_session(workspace)
            assert await writer.prompt(session, "stream") == "end_turn"
        await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
        async with spawn(tmp_path, url, "--store-read", standby, "--log-level", "debug") as reader:
            await reader.initialize()
            listed = await reader.request("session/list", {})
            page = await reader.page(session_address(session), max_messages=1)
        served = [line for line in reader.stderr.splitlines() if "the standby served" in line]
    store = PostgresStore(url)
    log = (await store.read(session)).events
    await store.aclose()
    answer = next(e for e in reversed(log) if type(e) is AssistantMessageEvent)
    assert answer.source_range is not None
    assert [item["sessionId"] for item in listed["sessions"]] == [session]
    assert (page.events, page.through_seq) == (log[answer.source_range[0] :], log[-1].seq)
    assert [line.split(": the standby served ", 1)[1] for line in served] == [
        "the session list as of WAL " + served[0].rsplit(" ", 1)[1],
        f"session {session} through seq {log[-1].seq}",
    ]
