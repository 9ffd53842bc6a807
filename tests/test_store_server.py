"""The server on each store engine, through the wire (SPEC 2.6): two `acp-server` processes on
one store follow each other, a second writer is refused, a killed writer is recovered."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fixtures_builder import Scenario, Step, write_fixture

from acp_server.client import AcpClient, ConnectionClosed, Follow, RpcError, session_address
from acp_server.core.events import (
    SessionEvent,
    TurnEnd,
    TurnEndReasonCompleted,
    TurnEndReasonInterrupted,
)
from acp_server.storage.url import open_store, parse_store_url

pytestmark = [pytest.mark.anyio, pytest.mark.process]

TIMEOUT = 60


def words(count: int) -> str:
    return " ".join(f"word{k % 13}" for k in range(count))


STREAM = Scenario([("stream", [Step(text=words(600))]), ("again", [Step(text="Done.")])])


@pytest.fixture(params=["jsonl", "sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/sessions.db"
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return f"file://{tmp_path}/sessions"


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


async def until_turn_end(follow: Follow) -> AsyncIterator[SessionEvent]:
    async for event in follow:
        yield event
        if type(event) is TurnEnd:
            return


async def test_a_second_process_follows_a_prompt_the_first_streams_gapless(
    tmp_path: Path, url: str
) -> None:
    (tmp_path / "workspace").mkdir()
    with anyio.fail_after(TIMEOUT):
        async with (
            spawn(tmp_path, url, "--pace-ms", "1") as writer,
            spawn(tmp_path, url) as reader,
        ):
            await writer.initialize()
            await reader.initialize()
            session = await writer.new_session(tmp_path / "workspace")
            follow = await reader.follow(session_address(session))
            seen: list[SessionEvent] = []
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(writer.prompt, session, "stream", lambda update: None)
                async for event in until_turn_end(follow):
                    seen.append(event)
            await follow.aclose()
    log = await stored_events(url, session)
    assert len(log) > 600
    assert seen == log  # followed from the empty session: every event came from the store
    assert list(follow.journal.events) == log


async def test_a_session_another_process_writes_cannot_be_loaded_for_writing(
    tmp_path: Path, url: str
) -> None:
    (tmp_path / "workspace").mkdir()
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, url) as first, spawn(tmp_path, url) as second:
            await first.initialize()
            await second.initialize()
            session = await first.new_session(tmp_path / "workspace")
            with pytest.raises(RpcError) as refused:
                await second.load_session(session, tmp_path / "workspace")
    assert (refused.value.message, refused.value.data) == (
        "Session in use: another process has it open for writing",
        {"reason": "locked"},
    )


async def test_a_writer_killed_mid_stream_is_recovered_by_the_next_process(
    tmp_path: Path, url: str
) -> None:
    (tmp_path / "workspace").mkdir()
    with anyio.fail_after(TIMEOUT):
        async with spawn(tmp_path, url, "--pace-ms", "2") as writer, spawn(tmp_path, url) as reader:
            await writer.initialize()
            await reader.initialize()
            session = await writer.new_session(tmp_path / "workspace")
            follow = await reader.follow(session_address(session))
            async with anyio.create_task_group() as tasks:

                async def prompt() -> None:
                    with pytest.raises(ConnectionClosed):  # the process is killed
                        await writer.prompt(session, "stream", lambda update: None)

                tasks.start_soon(prompt)
                async for event in follow:
                    if event.seq >= 100:  # chunks are stored: kill it mid-stream
                        writer.process.send_signal(signal.SIGKILL)
                        break
            await follow.aclose()
        async with spawn(tmp_path, url) as again:
            await again.initialize()
            await again.load_session(session, tmp_path / "workspace")
    log = await stored_events(url, session)
    assert type(log[-1]) is TurnEnd
    assert log[-1].data.reason == TurnEndReasonInterrupted()
    assert [e.seq for e in log] == list(range(len(log)))


async def test_postgresql_a_connection_dropped_mid_turn_fails_the_turn_and_the_next_one_works(
    tmp_path: Path, postgres_url: str
) -> None:
    """The writer's connection is dropped (as a database restart does) while a prompt streams,
    with no retry (`--store-retry 0`): the process stays up, the turn fails saying the database
    is unavailable, the next prompt works, and the log holds the first turn closed by recovery,
    gapless. (`test_postgres_retry.py`: a turn that streams through it.)"""
    import psycopg

    (tmp_path / "workspace").mkdir()
    with anyio.fail_after(TIMEOUT):
        async with (
            spawn(tmp_path, postgres_url, "--pace-ms", "2", "--store-retry", "0") as writer,
            spawn(tmp_path, postgres_url) as reader,
        ):
            await writer.initialize()
            await reader.initialize()
            session = await writer.new_session(tmp_path / "workspace")
            follow = await reader.follow(session_address(session))
            async with anyio.create_task_group() as tasks:

                async def prompt() -> None:
                    with pytest.raises(RpcError) as failed:
                        await writer.prompt(session, "stream", lambda update: None)
                    assert (failed.value.code, failed.value.data["reason"]) == (
                        -32013,
                        "database-unavailable",
                    )

                tasks.start_soon(prompt)
                async for event in follow:
                    if event.seq >= 100:  # chunks are stored: drop the writer's connection
                        with psycopg.connect(postgres_url, autocommit=True) as conn:
                            conn.execute(
                                "SELECT pg_terminate_backend(pid) FROM pg_locks "
                                "WHERE locktype = 'advisory'"
                            )
                        break
            await follow.aclose()
            assert await writer.prompt(session, "again") == "end_turn"
    log = await stored_events(postgres_url, session)
    ends = [e for e in log if type(e) is TurnEnd]
    assert [e.data.reason for e in ends] == [TurnEndReasonInterrupted(), TurnEndReasonCompleted()]
    assert [e.seq for e in log] == list(range(len(log)))
