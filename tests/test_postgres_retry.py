"""A turn that streams through its database going away (SPEC 2.6, docs/postgres.md): the whole
server restarted or the writer's connection killed mid-turn, the writer reconnects within
`--store-retry`, claims the session again and writes what the store lacks; the turn completes,
the stored log is gapless and holds exactly what the client was shown, and a follower in
another process gets every event once. Past the window the turn fails as before.

Each test runs against a cluster of this module's own, which it stops and starts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from fixtures_builder import Scenario, Step, write_fixture
from postgres_server import Cluster, fresh_database, server_binaries
from unavailable import unavailable

from acp_server.client import AcpClient, RpcError, session_address
from acp_server.core.events import (
    AssistantChunk,
    SessionEvent,
    TurnEnd,
    TurnEndReasonCompleted,
    TurnEndReasonInterrupted,
)
from acp_server.core.stream import TextDelta
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
        cluster.remove()


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


def terminate_writer(url: str) -> None:
    """End the backend of the connection holding a session's advisory lock in `url`'s
    database (the writer's), as a network failure or an administrator would."""
    with psycopg.connect(url, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()
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
    tmp_path: Path, cluster: Cluster, url: str, mode: str
) -> None:
    """`fast`: the server ends every session and shuts down cleanly; `immediate`: as a crash,
    the asynchronous commits not yet on disk are lost and written again."""
    await streamed_through(tmp_path, url, lambda: cluster.restart(mode))


async def test_a_turn_streams_through_its_connection_killed(tmp_path: Path, url: str) -> None:
    await streamed_through(tmp_path, url, lambda: terminate_writer(url))


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
                await anyio.to_thread.run_sync(cluster.stop, "fast")
            # The prompt failed while the server was down: only now does it come back.
            await anyio.to_thread.run_sync(cluster.start)
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
