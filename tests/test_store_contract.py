"""The store API's contract (SPEC 2.1 to 2.6), one suite run over every engine.

Each test takes `store` (a JSONL directory, a SQLite database, then a PostgreSQL database on
the server `postgres_url` gives) and holds it to the same
behaviour: create, append, recovery, refused and torn batches, SPEC 3.1's page cuts, listing,
deleting, a second writer refused, a copy round trip, and following a session that another
process writes. The few tests that only mean something for one engine say so in their name.
"""

from __future__ import annotations

import errno
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Final

import anyio
import msgspec
import pytest
from schema_versions import as_version

from acp_server.core.chunk_rows import TextChunks, TextChunksData, pack_chunk_runs
from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    SessionArchived,
    SessionArchivedData,
    SessionEvent,
    SessionForked,
    SessionForkedData,
    SessionTitle,
    SessionTitleData,
    StepData,
    StepEnd,
    StepStart,
    SubagentStart,
    SubagentStartData,
    ToolCall,
    ToolCallData,
    ToolResult,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnEndReasonInterrupted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.stream import AssistantText, TextDelta
from acp_server.storage.api import HistorySource, Store, copy_blobs, follow_stored, fork_stored
from acp_server.storage.errors import (
    DamagedStore,
    LogLocked,
    LogWriteFailed,
    SessionExists,
    SessionNotFound,
    StaleWriter,
    UnsupportedStore,
    UnsupportedVersion,
)
from acp_server.storage.jsonl.store import JsonlStore
from acp_server.storage.sql import postgres_links
from acp_server.storage.sql.postgres import PostgresStore
from acp_server.storage.sql.sqlite import SqliteStore
from acp_server.storage.url import StoreUrl, open_store, parse_store_url

pytestmark = pytest.mark.anyio

ENGINES = ["jsonl", "sqlite", pytest.param("postgresql", marks=pytest.mark.process)]


def store_url(engine: str, root: Path) -> StoreUrl:
    if engine == "sqlite":
        return StoreUrl("sqlite", root / "sessions.db", f"sqlite://{root}/sessions.db")
    return StoreUrl("jsonl", root / "sessions", str(root / "sessions"))


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def url(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> StoreUrl:
    if engine == "postgresql":
        return parse_store_url(request.getfixturevalue("postgres_url"))
    return store_url(engine, tmp_path)


@pytest.fixture
async def store(url: StoreUrl) -> AsyncIterator[Store]:
    opened = open_store(url)
    try:
        yield opened
    finally:
        await opened.aclose()


def header(session_id: str = "s1", created_at: int = 1000) -> SessionHeader:
    return SessionHeader(
        version=SESSION_FORMAT_VERSION, id=session_id, created_at=created_at, cwd="/work"
    )


class Events:
    """Events on contiguous seqs, shaped as the agent loop writes them."""

    def __init__(self, start: int = 0) -> None:
        self.events: list[SessionEvent] = []
        self.seq = start

    def add(self, cls: Callable[..., Any], data: Any, **envelope: Any) -> SessionEvent:
        event: SessionEvent = cls(self.seq, 10_000 + self.seq, data, **envelope)
        self.seq += 1
        self.events.append(event)
        return event

    def turn(self, turn: int, prompt: str, answer: list[str], *, end: bool = True) -> None:
        """One turn of one step; with `end` False, its step and turn left open."""
        self.add(TurnStart, TurnStartData(turn))
        self.add(
            UserMessageEvent, UserMessageData(turn, UserMessage(f"u{turn}", [TextContent(prompt)]))
        )
        self.add(StepStart, StepData(turn, 0))
        first = self.seq
        for text in answer:
            self.add(AssistantChunk, AssistantChunkData(turn, 0, TextDelta(0, text)))
        message = AssistantMessage(f"a{turn}", [AssistantText("".join(answer))])
        self.add(
            AssistantMessageEvent,
            AssistantMessageData(turn, 0, message),
            source_range=(first, self.seq - 1),
        )
        if end:
            self.add(StepEnd, StepData(turn, 0))
            self.add(TurnEnd, TurnEndData(turn, TurnEndReasonCompleted()))


def conversation(turns: int = 6) -> list[SessionEvent]:
    built = Events()
    for turn in range(turns):
        built.turn(turn, f"question {turn}", [f"w{turn}.{k} " for k in range(turn + 3)])
    return built.events


def after_turn(events: list[SessionEvent], turn: int) -> int:
    """How many events there are up to the `turn/end` of `turn`."""
    ends = [e.seq for e in events if type(e) is TurnEnd]
    return ends[turn] + 1


async def stored(store: Store, events: list[SessionEvent], *, batch: int = 7) -> None:
    """Session "s1" holding `events`, appended `batch` at a time, then closed."""
    writer = await store.create(header())
    for k in range(0, len(events), batch):
        writer.append(events[k : k + batch])
        await writer.flush()
    await writer.close()


# -- create, append, read ----------------------------------------------------------------------


async def test_a_created_session_has_its_header_and_no_events(store: Store) -> None:
    writer = await store.create(header())
    await writer.close()
    assert await store.header("s1") == header()
    read = await store.read("s1")
    assert (read.header, read.records, read.event_count) == (header(), [], 0)


async def test_creating_a_session_twice_is_refused(store: Store) -> None:
    await (await store.create(header())).close()
    with pytest.raises(SessionExists, match="s1"):
        await store.create(header())


async def test_appended_batches_read_back_as_the_same_events(store: Store) -> None:
    events = conversation()
    await stored(store, events)
    assert (await store.read("s1")).events == events


async def test_a_session_reads_as_the_lines_of_its_log_header_first(store: Store) -> None:
    events = conversation()
    await stored(store, events)
    lines = await store.lines("s1")
    read = list(lines)
    stored_log = await store.read("s1")
    assert read == [
        msgspec.json.encode(stored_log.header),
        *(msgspec.json.encode(r) for r in stored_log.records),
    ]
    assert (lines.count, lines.torn_tail, lines.size) == (
        len(read),
        False,
        sum(map(len, read)) + len(read),
    )
    assert "s1" in lines.path
    assert await store.damage() == []


async def test_a_batch_is_stored_packed_as_written_a_chunk_run_one_row(store: Store) -> None:
    built = Events()
    built.turn(0, "hi", ["a", "b", "c", "d", "e"])
    writer = await store.create(header())
    writer.append(built.events)
    await writer.sync()
    await writer.close()
    records = (await store.read("s1")).records
    rows = [r for r in records if type(r) is TextChunks]
    assert [(row.seq0, row.data.texts) for row in rows] == [(3, ["a", "b", "c", "d", "e"])]
    assert records == pack_chunk_runs(built.events)


async def test_a_batch_out_of_order_is_refused_whole(store: Store) -> None:
    events = conversation(1)
    writer = await store.create(header())
    writer.append(events[:2])
    with pytest.raises(ValueError, match="expected seq 2, got 3"):
        writer.append(events[3:5])
    writer.append(events[2:])
    await writer.close()
    assert (await store.read("s1")).events == events


async def test_an_unknown_session_is_not_found(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        await store.header("nobody")
    with pytest.raises(SessionNotFound):
        await store.read("nobody")
    assert await store.exists("nobody") is False


async def test_a_header_of_another_format_version_is_refused(store: Store) -> None:
    newer = msgspec.structs.replace(header(), version=SESSION_FORMAT_VERSION + 1)
    await (await store.create(newer)).close()
    with pytest.raises(UnsupportedVersion, match=f"version {SESSION_FORMAT_VERSION + 1}"):
        await store.header("s1")


# -- the single writer, recovery ---------------------------------------------------------------


async def test_a_second_writer_is_refused_naming_the_session(store: Store) -> None:
    writer = await store.create(header("held"))
    with pytest.raises(LogLocked, match="held"):
        await store.open("held", 0)
    await writer.close()
    await (await store.open("held", 0)).writer.close()  # the claim went with the writer


async def test_a_session_that_ended_its_turns_opens_unchanged(store: Store) -> None:
    events = conversation(2)
    await stored(store, events)
    opened = await store.open("s1", 99)
    await opened.writer.close()
    assert (opened.closers, opened.events) == ([], events)


async def test_opening_closes_an_interrupted_turn_and_stores_the_closers(store: Store) -> None:
    built = Events()
    built.turn(0, "hi", ["x", "y", "z"], end=False)
    call = built.add(ToolCall, ToolCallData(0, 0, "c1", "read_file", "{}"))
    await stored(store, built.events)
    opened = await store.open("s1", 777)
    await opened.writer.close()
    result, step_end, turn_end = opened.closers
    assert type(result) is ToolResult and result.data.call_id == "c1"
    assert result.source_range == (call.seq, call.seq)
    assert step_end == StepEnd(call.seq + 2, 777, StepData(0, 0))
    assert turn_end == TurnEnd(call.seq + 3, 777, TurnEndData(0, TurnEndReasonInterrupted()))
    assert (await store.read("s1")).events == [*built.events, *opened.closers]


async def test_appends_after_opening_continue_the_seqs(store: Store) -> None:
    events = conversation(3)
    cut = after_turn(events, 1)
    await stored(store, events[:cut])
    opened = await store.open("s1", 0)
    opened.writer.append(events[cut:])
    await opened.writer.sync()
    await opened.writer.close()
    assert (await store.read("s1")).events == events


async def test_a_batch_that_never_completed_is_left_out_and_writing_continues(
    engine: str, store: Store, url: StoreUrl, tmp_path: Path
) -> None:
    """A torn JSONL line, or a database transaction that never committed: not an event."""
    events = conversation(2)
    cut = after_turn(events, 0)
    await stored(store, events[:cut])
    tear(engine, url, tmp_path, cut)
    assert (await store.read("s1")).events == events[:cut]
    opened = await store.open("s1", 0)
    assert (opened.closers, opened.log.length) == ([], cut)
    opened.writer.append(events[cut:])
    await opened.writer.close()
    assert (await store.read("s1")).events == events


def tear(engine: str, url: StoreUrl, root: Path, seq: int) -> None:
    """What a process killed in the middle of writing a batch of session "s1" leaves."""
    if engine == "jsonl":
        with open(root / "sessions" / "s1" / "session.jsonl", "ab") as file:
            file.write(b'{"type":"turn/start","seq":%d,"ti' % seq)
        return
    if engine == "postgresql":
        import psycopg

        conn = psycopg.connect(url.text)  # a transaction begins with the first statement
        conn.execute(
            "INSERT INTO acp_records VALUES ('s1', %s, 1, '{\"type\":\"turn/start\"}')", (seq,)
        )
        conn.execute("UPDATE acp_sessions SET next_seq = %s WHERE id = 's1'", (seq + 1,))
        conn.close()  # no COMMIT: rolled back
        return
    db = sqlite3.connect(root / "sessions.db", isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO records VALUES ('s1', ?, 1, '{\"type\":\"turn/start\"')", (seq,))
    db.execute("UPDATE sessions SET next_seq = ? WHERE id = 's1'", (seq + 1,))
    db.close()  # no COMMIT: rolled back


async def test_sqlite_a_writer_behind_the_stored_next_seq_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = SqliteStore(tmp_path / "sessions.db")
    events = conversation(1)
    writer = await store.create(header())
    writer.append(events[:3])
    await writer.flush()
    # Another writer (past the lock) appended meanwhile: the stored next seq moved on.
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    db.execute("UPDATE sessions SET next_seq = 4 WHERE id = 's1'")
    db.close()
    writer.append(events[3:5])
    with pytest.raises(StaleWriter, match=r"s1.*from seq 3"):
        await writer.flush()
    assert writer.failure is not None
    await writer.close()
    rows = sqlite3.connect(tmp_path / "sessions.db").execute("SELECT seq0 FROM records").fetchall()
    assert rows == [(0,), (1,), (2,)]
    await store.aclose()


async def test_sqlite_a_database_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    await SqliteStore(tmp_path / "sessions.db").aclose()
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    db.execute("UPDATE store SET value = 99 WHERE key = 'schema_version'")
    db.close()
    with pytest.raises(UnsupportedStore, match=r"schema version 99 .*reads version 5"):
        SqliteStore(tmp_path / "sessions.db")


async def test_sqlite_a_database_of_schema_version_1_is_upgraded_with_nothing_archived(
    tmp_path: Path,
) -> None:
    first = SqliteStore(tmp_path / "sessions.db")
    await stored(first, conversation(1))
    await first.aclose()
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    as_version(db.execute, "", 1)
    db.close()
    store = SqliteStore(tmp_path / "sessions.db")
    listed = await store.list_sessions()
    writer = (await store.open("s1", 20_000)).writer
    writer.append([SessionArchived(writer.next_seq, 20_000, SessionArchivedData(True))])
    await writer.close()
    archived = [item.archived for item in await store.list_sessions()]
    await store.aclose()
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    version = db.execute("SELECT value FROM store WHERE key = 'schema_version'").fetchone()
    db.close()
    assert ([item.archived for item in listed], archived, version) == ([False], [True], (5,))


async def test_sqlite_a_database_of_schema_version_2_is_upgraded_with_a_blobs_table(
    tmp_path: Path,
) -> None:
    first = SqliteStore(tmp_path / "sessions.db")
    await stored(first, conversation(1))
    await first.aclose()
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    as_version(db.execute, "", 2)
    db.close()
    store = SqliteStore(tmp_path / "sessions.db")
    sha256 = await store.put_blob("s1", b"kept")
    kept = await store.get_blob("s1", sha256)
    await store.aclose()
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    version = db.execute("SELECT value FROM store WHERE key = 'schema_version'").fetchone()
    db.close()
    assert (kept, version) == (b"kept", (5,))


async def test_sqlite_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    with pytest.raises(DamagedStore, match="cannot open the database"):
        SqliteStore(tmp_path / "notes.db")


def sql(url: str, statement: str, *params: object) -> list[tuple[Any, ...]]:
    """One statement on a connection of its own (committed); the rows it returned."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement.encode(), params)
        return cur.fetchall() if cur.description else []


@pytest.mark.process
async def test_postgresql_a_record_too_big_for_its_row_is_stored_uncompressed(
    postgres_url: str,
) -> None:
    """Out of line but not compressed: a load reads the bytes faster than the server inflates
    them."""
    store = PostgresStore(postgres_url)
    built = Events()
    built.turn(0, "question", ["a" * 100_000])
    await stored(store, built.events)
    length, size = sql(
        postgres_url,
        "SELECT octet_length(body::text), pg_column_size(body) FROM acp_records "
        "ORDER BY 1 DESC LIMIT 1",
    )[0]
    assert size >= length > 100_000
    await store.aclose()


@pytest.mark.process
async def test_postgresql_a_writer_behind_the_stored_next_seq_is_refused_and_writes_nothing(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    events = conversation(1)
    writer = await store.create(header())
    writer.append(events[:3])
    await writer.flush()
    sql(postgres_url, "UPDATE acp_sessions SET next_seq = 4 WHERE id = 's1'")
    writer.append(events[3:5])
    with pytest.raises(StaleWriter, match=r"s1.*from seq 3"):
        await writer.flush()
    assert writer.failure is not None
    await writer.close()
    assert sql(postgres_url, "SELECT seq0 FROM acp_records ORDER BY seq0") == [(0,), (1,), (2,)]
    await store.aclose()


@pytest.mark.process
async def test_postgresql_a_writer_whose_epoch_was_taken_over_commits_nothing(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    events = conversation(1)
    writer = await store.create(header())
    writer.append(events[:3])
    await writer.flush()
    # What a writer that claimed the session after this one lost its lock does first.
    sql(postgres_url, "UPDATE acp_sessions SET epoch = epoch + 1 WHERE id = 's1'")
    writer.append(events[3:5])
    with pytest.raises(StaleWriter, match="s1"):
        await writer.flush()
    await writer.close()
    assert sql(postgres_url, "SELECT next_seq FROM acp_sessions") == [(3,)]
    await store.aclose()


@pytest.mark.process
async def test_postgresql_a_writer_whose_connection_dropped_fails_and_reopens_from_the_database(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url, retry_seconds=0)  # no retry: it fails at once
    events = conversation(2)
    cut = after_turn(events, 0)
    writer = await store.create(header())
    writer.append(events[:cut])
    await writer.sync()
    sql(
        postgres_url,
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'",
    )
    writer.append(events[cut : cut + 2])
    with pytest.raises(LogWriteFailed, match="s1"):
        await writer.flush()
    opened = await writer.reopen(5)
    assert opened.events == events[:cut]
    opened.writer.append(events[cut:])
    await opened.writer.close()
    assert (await store.read("s1")).events == events
    await store.aclose()


def hashtext_twins(url: str) -> tuple[str, str]:
    """Two session ids of the same PostgreSQL `hashtext`, found by the server itself: among
    300,000 ids over 2^32 hashes a pair turns up but once in 30,000 tries, so a few tries do."""
    for start in range(0, 3_000_000, 300_000):
        twins = sql(
            url,
            "SELECT array_agg(id ORDER BY id) FROM "
            "(SELECT 'twin-' || n AS id FROM generate_series(%s::int, %s::int) AS n) AS ids "
            "GROUP BY hashtext(id) HAVING count(*) > 1 LIMIT 1",
            start,
            start + 299_999,
        )
        if twins:
            first, second = twins[0][0][:2]
            return first, second
    raise AssertionError("no two ids of the same hashtext among 3,000,000")


@pytest.mark.process
async def test_postgresql_two_sessions_whose_ids_share_a_hashtext_are_written_at_once(
    postgres_url: str,
) -> None:
    ids = hashtext_twins(postgres_url)
    assert len(set(sql(postgres_url, "SELECT hashtext(%s), hashtext(%s)", *ids)[0])) == 1
    store = PostgresStore(postgres_url)
    try:
        events = conversation(2)
        cut = after_turn(events, 0)
        # Each claim is taken while the other is held: first by create, then by open.
        writers = [await store.create(header(session_id)) for session_id in ids]
        for writer in writers:
            writer.append(events[:cut])
            await writer.close()
        writers = [(await store.open(session_id, 0)).writer for session_id in ids[::-1]]
        for writer in writers:
            writer.append(events[cut:])
            await writer.close()
        assert [(await store.read(session_id)).events for session_id in ids] == [events, events]
    finally:
        await store.aclose()


@pytest.mark.process
async def test_postgresql_records_are_kept_byte_for_byte_in_json_columns(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    built = Events()
    built.turn(0, "nul \u0000 and keys", ["a\u0000b"])
    await stored(store, built.events, batch=100)
    await store.aclose()
    columns = sql(
        postgres_url,
        "SELECT table_name, data_type FROM information_schema.columns "
        "WHERE column_name IN ('body', 'header') ORDER BY table_name",
    )
    assert columns == [("acp_records", "json"), ("acp_sessions", "json")]
    bodies = [
        row[0] for row in sql(postgres_url, "SELECT body::text FROM acp_records ORDER BY seq0")
    ]
    assert bodies == [msgspec.json.encode(r).decode() for r in pack_chunk_runs(built.events)]


@pytest.mark.process
async def test_postgresql_a_database_of_another_schema_version_is_refused(
    postgres_url: str,
) -> None:
    first = PostgresStore(postgres_url)
    await first.prepare()
    await first.aclose()
    sql(postgres_url, "UPDATE acp_store SET value = 99 WHERE key = 'schema_version'")
    store = PostgresStore(postgres_url)
    with pytest.raises(UnsupportedStore, match=r"schema version 99 .*reads version 5"):
        await store.prepare()
    await store.aclose()


@pytest.mark.process
async def test_postgresql_a_database_of_schema_version_1_is_upgraded_with_nothing_archived(
    postgres_url: str,
) -> None:
    first = PostgresStore(postgres_url)
    await stored(first, conversation(1))
    await first.aclose()
    as_version(lambda statement: sql(postgres_url, statement), "acp_", 1)
    store = PostgresStore(postgres_url)
    listed = await store.list_sessions()
    writer = (await store.open("s1", 20_000)).writer
    writer.append([SessionArchived(writer.next_seq, 20_000, SessionArchivedData(True))])
    await writer.close()
    archived = [item.archived for item in await store.list_sessions()]
    await store.aclose()
    version = sql(postgres_url, "SELECT value FROM acp_store WHERE key = 'schema_version'")
    assert ([item.archived for item in listed], archived, version) == ([False], [True], [(5,)])


@pytest.mark.process
async def test_postgresql_a_database_of_schema_version_2_is_upgraded_with_a_blobs_table(
    postgres_url: str,
) -> None:
    first = PostgresStore(postgres_url)
    await stored(first, conversation(1))
    await first.aclose()
    as_version(lambda statement: sql(postgres_url, statement), "acp_", 2)
    store = PostgresStore(postgres_url)
    sha256 = await store.put_blob("s1", b"kept")
    kept = await store.get_blob("s1", sha256)
    await store.aclose()
    version = sql(postgres_url, "SELECT value FROM acp_store WHERE key = 'schema_version'")
    assert (kept, version) == (b"kept", [(5,)])


@pytest.mark.process
async def test_postgresql_a_follower_is_woken_by_notifications_not_the_poll(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the safety poll an hour long, only `LISTEN/NOTIFY` (and the catch-up after the
    listening connection reconnects) can bring the appends to the follower."""
    monkeypatch.setattr(postgres_links, "SAFETY_POLL_S", 3600.0)
    store = PostgresStore(postgres_url)
    events = conversation(4)
    cut = after_turn(events, 0)
    await stored(store, events[:cut])
    writer = (await store.open("s1", 0)).writer
    received: list[SessionEvent] = []
    arrived = anyio.Event()
    waiting = anyio.Event()
    wait = postgres_links.PostgresWatch.wait

    async def watched_wait(watch: postgres_links.PostgresWatch, poll: float) -> None:
        if not watch._woken.is_set():
            waiting.set()  # the follower has read all there is: only a wake-up brings more
        await wait(watch, poll)

    monkeypatch.setattr(postgres_links.PostgresWatch, "wait", watched_wait)

    async def follow(until: int) -> None:
        async for batch in follow_stored(store, "s1", cut):
            received.extend(batch)
            if received[-1].seq >= until:
                arrived.set()
            if received[-1].seq == events[-1].seq:
                return

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tasks:
            probe = store.watch("s1")  # the store's listening connection starts
            assert store._listener is not None
            await store._listener.listening.wait()
            probe.close()
            tasks.start_soon(follow, cut + 1)
            await waiting.wait()
            writer.append(events[cut : cut + 2])
            await writer.flush()
            await arrived.wait()
            arrived = anyio.Event()
            sql(
                postgres_url,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE 'LISTEN%%'",
            )
            writer.append(events[cut + 2 :])
            await writer.close()
    assert received == events[cut:]
    await store.aclose()


# -- history: pages and ranges -----------------------------------------------------------------


@pytest.mark.parametrize("max_messages", [1, 2, 3, 5, 50])
async def test_pages_are_those_of_spec_3_1_for_every_end(store: Store, max_messages: int) -> None:
    events = conversation()
    await stored(store, events, batch=4)  # rows split by flushes, as a long stream leaves them
    expected = EventLog(pack_chunk_runs(events))
    source = await store.history("s1")
    assert source.last_seq == len(events) - 1
    for end in range(len(events) + 1):
        assert await source.page(end, max_messages) == expected.page(end, max_messages)


async def test_a_seq_range_reads_back_its_canonical_records(store: Store) -> None:
    events = conversation(3)
    await stored(store, events, batch=5)
    expected = EventLog(pack_chunk_runs(events))
    source = await store.history("s1")
    for lo, hi in [(0, len(events)), (4, 9), (5, 6), (7, 7), (10, len(events))]:
        assert await source.records(lo, hi) == expected.records_between(lo, hi)


async def test_history_sees_what_was_appended_after_it_was_opened(store: Store) -> None:
    events = conversation(2)
    writer = await store.create(header())
    writer.append(events[:5])
    await writer.flush()
    source = await store.history("s1")
    assert source.last_seq == 4
    writer.append(events[5:])
    await writer.flush()
    await source.refresh()
    assert source.last_seq == len(events) - 1
    assert await source.records(5, len(events)) == pack_chunk_runs(events[5:])
    await writer.close()


async def test_history_knows_the_children_the_log_started(store: Store) -> None:
    built = Events()
    built.turn(0, "hi", ["a"], end=False)
    built.add(SubagentStart, SubagentStartData(0, 0, "c1", "child1", "one-shot"))
    await stored(store, built.events)
    source = await store.history("s1")
    assert (await source.has_child("child1"), await source.has_child("child2")) == (True, False)


# -- list, delete, copy ------------------------------------------------------------------------


async def test_list_gives_each_session_its_last_title_and_last_event_time(store: Store) -> None:
    built = Events()
    built.add(SessionTitle, SessionTitleData("first"))
    built.turn(0, "hi", ["a", "b", "c"])
    built.add(SessionTitle, SessionTitleData("second"))
    built.turn(1, "again", ["d"])
    await stored(store, built.events)
    await (await store.create(header("empty", created_at=5))).close()
    listed = sorted(await store.list_sessions(), key=lambda item: item.header.id)
    assert [(i.header.id, i.title, i.updated_at) for i in listed] == [
        ("empty", None, None),
        ("s1", "second", built.events[-1].time),
    ]


async def test_list_says_whether_the_last_archive_event_archived_each_session(
    store: Store,
) -> None:
    built = Events()
    built.add(SessionArchived, SessionArchivedData(True))
    built.turn(0, "hi", ["a", "b", "c"])
    built.add(SessionArchived, SessionArchivedData(False))
    built.add(SessionArchived, SessionArchivedData(True))
    await stored(store, built.events, batch=2)
    writer = await store.create(header("back", created_at=5))
    writer.append([SessionArchived(0, 7, SessionArchivedData(True))])
    await writer.flush()
    writer.append([SessionArchived(1, 8, SessionArchivedData(False))])
    await writer.close()
    await (await store.create(header("never", created_at=6))).close()
    listed = sorted(await store.list_sessions(), key=lambda item: item.header.id)
    assert [(i.header.id, i.archived) for i in listed] == [
        ("back", False),
        ("never", False),
        ("s1", True),
    ]


async def test_a_copy_keeps_the_archive_state(store: Store, tmp_path: Path) -> None:
    built = Events()
    built.turn(0, "hi", ["a"])
    built.add(SessionArchived, SessionArchivedData(True))
    source = JsonlStore(tmp_path / "source")
    await stored(source, built.events)
    read = await source.read("s1")
    await store.write_copy(read.header, read.records)
    assert [i.archived for i in await store.list_sessions()] == [True]


async def test_a_deleted_session_is_gone(store: Store) -> None:
    await stored(store, conversation(1))
    await store.delete("s1")
    assert await store.exists("s1") is False
    assert await store.list_sessions() == []
    with pytest.raises(SessionNotFound):
        await store.history("s1")
    await (await store.create(header())).close()  # the id can be used again


async def test_a_session_being_written_is_not_deleted(store: Store) -> None:
    writer = await store.create(header())
    with pytest.raises(LogLocked, match="s1"):
        await store.delete("s1")
    await writer.close()
    assert await store.exists("s1") is True


async def test_deleting_an_unknown_session_is_refused(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        await store.delete("nobody")


async def test_a_copy_round_trips_jsonl_sqlite_jsonl_with_identical_records(
    tmp_path: Path,
) -> None:
    events = conversation()
    first = JsonlStore(tmp_path / "a")
    await stored(first, events, batch=3)
    middle = SqliteStore(tmp_path / "b.db")
    last = JsonlStore(tmp_path / "c")
    source = await first.read("s1")
    await middle.write_copy(source.header, source.records)
    copied = await middle.read("s1")
    await last.write_copy(copied.header, copied.records)
    final = await last.read("s1")
    assert (final.header, final.records, final.events) == (
        source.header,
        source.records,
        events,
    )
    assert (tmp_path / "c" / "s1" / "session.jsonl").read_bytes() == (
        tmp_path / "a" / "s1" / "session.jsonl"
    ).read_bytes()
    await middle.aclose()


async def test_a_copy_onto_an_existing_session_is_refused(store: Store) -> None:
    await stored(store, conversation(1))
    with pytest.raises(SessionExists):
        await store.write_copy(header(), [])


# -- blobs (checkpoints' file contents) ---------------------------------------------------------

HELLO_SHA256: Final = "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"


async def test_a_blob_is_kept_under_its_sha256_once(store: Store) -> None:
    await stored(store, conversation(1))
    first = await store.put_blob("s1", b"hello")
    again = await store.put_blob("s1", b"hello")
    assert (first, again, await store.get_blob("s1", first)) == (
        HELLO_SHA256,
        HELLO_SHA256,
        b"hello",
    )
    assert await store.blob_digests("s1") == [HELLO_SHA256]


async def test_an_empty_content_is_a_blob_like_any_other(store: Store) -> None:
    await stored(store, conversation(1))
    sha256 = await store.put_blob("s1", b"")
    assert await store.get_blob("s1", sha256) == b""


async def test_a_blob_not_kept_is_none(store: Store) -> None:
    await stored(store, conversation(1))
    assert await store.get_blob("s1", HELLO_SHA256) is None
    assert await store.blob_digests("s1") == []


async def test_blobs_are_kept_per_session(store: Store) -> None:
    await stored(store, conversation(1))
    await (await store.create(header("s2"))).close()
    await store.put_blob("s1", b"hello")
    assert (await store.get_blob("s2", HELLO_SHA256), await store.blob_digests("s2")) == (None, [])


async def test_what_is_not_a_digest_is_refused(store: Store) -> None:
    await stored(store, conversation(1))
    with pytest.raises(ValueError, match="not a SHA-256 digest"):
        await store.get_blob("s1", "../session.jsonl")


async def test_deleting_a_session_deletes_its_blobs(store: Store) -> None:
    await stored(store, conversation(1))
    await store.put_blob("s1", b"hello")
    await store.delete("s1")
    await (await store.create(header())).close()  # the id again: nothing of the old one
    assert (await store.get_blob("s1", HELLO_SHA256), await store.blob_digests("s1")) == (None, [])


async def test_a_fork_carries_the_parent_s_blobs(store: Store) -> None:
    events = conversation(3)
    await stored(store, events, batch=len(events))
    await store.put_blob("s1", b"hello")
    opened = await fork_stored(store, await store.read("s1"), FORK_CUT, header("f1"), 5000)
    await opened.writer.close()
    assert await store.get_blob("f1", HELLO_SHA256) == b"hello"


async def test_copy_blobs_carries_every_blob_to_another_engine(
    store: Store, tmp_path: Path
) -> None:
    source = JsonlStore(tmp_path / "source")
    await stored(source, conversation(1))
    await source.put_blob("s1", b"hello")
    await source.put_blob("s1", b"world")
    await stored(store, conversation(1))
    await copy_blobs(source, "s1", store, "s1")
    assert await store.blob_digests("s1") == await source.blob_digests("s1")
    assert await store.get_blob("s1", HELLO_SHA256) == b"hello"


# -- following across processes ----------------------------------------------------------------

WRITER_PROCESS = textwrap.dedent(
    """
    import sys, anyio, msgspec
    from acp_server.core.events import KnownEvent
    from acp_server.storage.url import parse_store_url, open_store

    async def main():
        store = open_store(parse_store_url(sys.argv[1]))
        events = msgspec.json.decode(sys.stdin.buffer.read(), type=list[KnownEvent])
        opened = await store.open("s1", 0)
        for k in range(0, len(events), 3):
            opened.writer.append(events[k : k + 3])
            await opened.writer.flush()
        await opened.writer.close()
        await store.aclose()

    anyio.run(main)
    """
)


@pytest.mark.process
async def test_a_follower_gets_what_another_process_appends_in_order_gapless(
    store: Store, url: StoreUrl
) -> None:
    events = conversation(4)
    cut = after_turn(events, 0)
    await stored(store, events[:cut])
    received: list[SessionEvent] = []
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:

            async def follow() -> None:
                async for batch in follow_stored(store, "s1", cut, interval=0.01):
                    received.extend(batch)
                    if received[-1].seq == events[-1].seq:
                        tg.cancel_scope.cancel()

            tg.start_soon(follow)
            process = await anyio.run_process(
                [sys.executable, "-c", WRITER_PROCESS, url.text],
                input=msgspec.json.encode(events[cut:]),
                stderr=subprocess.PIPE,
                check=False,
            )
            assert process.returncode == 0, process.stderr.decode()
    assert received == events[cut:]


async def test_following_a_deleted_session_ends(store: Store) -> None:
    await stored(store, conversation(1))
    with anyio.fail_after(30):
        follower = follow_stored(store, "s1", 0, interval=0.01)
        first = await follower.__anext__()
        await store.delete("s1")
        with pytest.raises(SessionNotFound):
            await follower.__anext__()
    assert [e.seq for e in first] == list(range(len(conversation(1))))


class Unreachable:
    """A session's history source whose first `failures` refreshes fail as a database that is
    failing over does (the follower's own reads, not its wake-ups)."""

    def __init__(self, source: HistorySource, failures: int) -> None:
        self.source = source
        self.failures = failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)

    async def refresh(self) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.ECONNRESET, "the database is unreachable")
        await self.source.refresh()


async def test_a_follower_whose_reads_fail_for_a_while_keeps_following(
    store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    events = conversation(2)
    await stored(store, events)
    history = store.history

    async def unreachable_at_first(session_id: str) -> HistorySource:
        return Unreachable(await history(session_id), failures=3)  # type: ignore[return-value]

    monkeypatch.setattr(store, "history", unreachable_at_first)
    with anyio.fail_after(30):
        follower = follow_stored(store, "s1", 0, interval=0.01)
        first = await follower.__anext__()
        await follower.aclose()
    assert first == events
    said = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert said == [
        "following s1: the store cannot be read: [Errno 104] the database is unreachable"
    ]


async def test_jsonl_keeps_the_history_of_the_most_recently_used_sessions_only(
    tmp_path: Path,
) -> None:
    from acp_server.storage.jsonl.store import INDEX_CACHE

    store = JsonlStore(tmp_path)
    ids = [f"s{k}" for k in range(INDEX_CACHE + 2)]
    for session_id in ids:
        await (await store.create(header(session_id))).close()
        await store.history(session_id)
    assert list(store._indexes) == ids[2:]
    await store.delete(ids[-1])
    assert list(store._indexes) == ids[2:-1]


# -- forking (SPEC 4.7) ------------------------------------------------------------------------

FORK_CUT: Final = 24
"""In `conversation(3)` stored whole, turn 2 streams seqs 22..26 as one row: a fork through
seq 24 cuts it after its third member, mid-stream."""


def forked_log(events: list[SessionEvent]) -> list[SessionEvent]:
    """`events` forked from "s1" through `FORK_CUT` at time 5000: the prefix, `session/forked`,
    then the closers of the step and turn the cut leaves open."""
    return [
        *events[: FORK_CUT + 1],
        SessionForked(25, 5000, SessionForkedData("s1", FORK_CUT)),
        StepEnd(26, 5000, StepData(2, 0)),
        TurnEnd(27, 5000, TurnEndData(2, TurnEndReasonInterrupted())),
    ]


async def test_a_fork_holds_the_parent_s_events_through_the_cut_then_session_forked(
    store: Store,
) -> None:
    events = conversation(3)
    await stored(store, events, batch=len(events))
    opened = await fork_stored(store, await store.read("s1"), FORK_CUT, header("f1"), 5000)
    assert (opened.events, opened.closers, opened.writer.next_seq) == (forked_log(events), [], 28)
    await opened.writer.close()
    fork = await store.read("f1")
    assert (fork.header, fork.events) == (header("f1"), forked_log(events))
    assert [r for r in fork.records if type(r) is TextChunks][-1] == TextChunks(
        22, 10_022, TextChunksData(2, 0, 0, [1, 1], ["w2.0 ", "w2.1 ", "w2.2 "])
    )
    assert (await store.read("s1")).events == events  # the parent is left as it was


async def test_a_fork_is_continued_like_any_session(store: Store) -> None:
    events = conversation(3)
    await stored(store, events, batch=len(events))
    opened = await fork_stored(store, await store.read("s1"), FORK_CUT, header("f1"), 5000)
    more = Events(28)
    more.turn(3, "again", ["x"])
    opened.writer.append(more.events)
    await opened.writer.close()
    reopened = await store.open("f1", 6000)
    assert (reopened.events, reopened.closers) == ([*forked_log(events), *more.events], [])
    await reopened.writer.close()


async def test_a_fork_pages_as_any_session(store: Store) -> None:
    events = conversation(3)
    await stored(store, events, batch=len(events))
    await (
        await fork_stored(store, await store.read("s1"), FORK_CUT, header("f1"), 5000)
    ).writer.close()
    expected = EventLog(pack_chunk_runs(forked_log(events)))
    source = await store.history("f1")
    assert source.last_seq == 27
    for end in range(29):
        assert await source.page(end, 2) == expected.page(end, 2)


async def test_a_fork_of_a_session_being_written_copies_what_is_stored(store: Store) -> None:
    events = conversation(3)
    writer = await store.create(header())
    writer.append(events[: FORK_CUT + 1])
    await writer.flush()
    writer.append(events[FORK_CUT + 1 :])  # queued, not yet stored
    opened = await fork_stored(store, await store.read("s1"), FORK_CUT, header("f1"), 5000)
    assert opened.events == forked_log(events)
    await opened.writer.close()
    await writer.close()


async def test_a_fork_onto_an_existing_session_is_refused(store: Store) -> None:
    await stored(store, conversation(1))
    with pytest.raises(SessionExists):
        await fork_stored(store, await store.read("s1"), 0, header("s1"), 5000)
