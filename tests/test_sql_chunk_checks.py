"""The SQLite and PostgreSQL stores keep a chunk check for each run of chunk rows in a `checks`
table (`acp_checks`), written in the transaction of the batch that ends the run: a continuation
keeps a run whose rows match their check packed instead of decoding them, and decodes every
other row as before (an older database, a check lost or stale), keeping the checks it made."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from schema_versions import as_version
from strategies import streamed_turn

from acp_server.core.chunk_checks import MIN_CHECKED_EVENTS, ChunkCheck, PackedChunks
from acp_server.core.events import SessionEvent
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.projection import project_load
from acp_server.storage.api import Store, fork_stored
from acp_server.storage.errors import CorruptLog, StaleWriter
from acp_server.storage.sql.postgres import PostgresStore
from acp_server.storage.sql.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

SID = "s"
DELTAS = 3 * MIN_CHECKED_EVENTS
TURN_EVENTS = DELTAS + 8
RUN = DELTAS + 2
"""A step's run: its block start, its deltas, its block end."""
EVENTS = streamed_turn(0, 0, DELTAS) + streamed_turn(1, TURN_EVENTS, DELTAS)
RUNS = [(3, RUN), (TURN_EVENTS + 3, RUN)]
"""(first seq, events) of each step's run of chunks in `EVENTS`."""


class Tables:
    """The store's tables, reached past the store (as another program, or damage, would)."""

    def __init__(self, engine: str, where: str) -> None:
        self.engine = engine
        self.where = where
        self.prefix = "acp_" if engine == "postgresql" else ""

    def run(self, statement: str, *params: object) -> list[tuple[Any, ...]]:
        """One statement, committed: `{t}` before each table, `?` for each parameter, `{body}`
        for a record's JSON text and `{json}` after a parameter that is one."""
        postgresql = self.engine == "postgresql"
        statement = (
            statement.replace("{t}", self.prefix)
            .replace("{body}", "body::text" if postgresql else "body")
            .replace("{json}", "::json" if postgresql else "")
        )
        if postgresql:
            import psycopg

            with psycopg.connect(self.where, autocommit=True) as conn:
                cur = conn.execute(statement.replace("?", "%s").encode(), params)
                return cur.fetchall() if cur.description else []
        db = sqlite3.connect(self.where, isolation_level=None)
        try:
            return db.execute(statement, params).fetchall()
        finally:
            db.close()

    def checks(self, session_id: str = SID) -> list[ChunkCheck]:
        rows = self.run(
            "SELECT chunk_check FROM {t}checks WHERE session = ? ORDER BY line", session_id
        )
        return [msgspec.json.decode(text, type=ChunkCheck) for (text,) in rows]

    def runs(self, session_id: str = SID) -> list[tuple[int, int]]:
        """(first seq, events) of each check kept for the session."""
        return [(check.seq0, check.count) for check in self.checks(session_id)]


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def engine(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def where(engine: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if engine == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(tmp_path / "sessions.db")


def open_engine(engine: str, where: str, *, pack: bool = True) -> Store:
    return (
        PostgresStore(where, pack=pack) if engine == "postgresql" else SqliteStore(where, pack=pack)
    )


@pytest.fixture
async def store(engine: str, where: str) -> AsyncIterator[Store]:
    opened = open_engine(engine, where)
    try:
        yield opened
    finally:
        await opened.aclose()


@pytest.fixture
def tables(engine: str, where: str) -> Tables:
    return Tables(engine, where)


def header(session_id: str = SID) -> SessionHeader:
    return SessionHeader(version=SESSION_FORMAT_VERSION, id=session_id, created_at=0, cwd="/w")


async def write_streamed(store: Store, events: list[SessionEvent] = EVENTS) -> None:
    """Session `SID` holding `events`, written as the loop writes them: a flush every 10
    events, so each step's chunks are many short rows."""
    writer = await store.create(header())
    for start in range(0, len(events), 10):
        writer.append(events[start : start + 10])
        await writer.flush()
    await writer.close()


async def packed_runs(store: Store, session_id: str = SID) -> list[tuple[int, int]]:
    """(first seq, events) of each run a continuation of the session keeps packed."""
    opened = await store.open(session_id, 0)
    await opened.writer.close()
    return [(r.seq0, r.count) for r in opened.log.records_from(0) if type(r) is PackedChunks]


def first_row(tables: Tables, turn: int) -> tuple[int, int, str]:
    """The line (the header is line 1), first seq and JSON text of the first chunk row of
    `turn`'s run."""
    rows = tables.run("SELECT seq0, {body} FROM {t}records ORDER BY seq0")
    return next(
        (line, seq0, body)
        for line, (seq0, body) in enumerate(rows, start=2)
        if '"text-chunks"' in body and f'"turn":{turn},' in body
    )


async def test_a_run_gets_its_check_in_the_transaction_of_the_batch_that_ends_it(
    store: Store, tables: Tables
) -> None:
    writer = await store.create(header())
    ended = TURN_EVENTS - 3  # the first step's message ends its run
    for start in range(0, ended, 10):
        writer.append(EVENTS[start : min(start + 10, ended)])
        await writer.flush()
    before = tables.runs()
    writer.append(EVENTS[ended : ended + 1])
    await writer.flush()
    after = tables.runs()
    await writer.close()

    assert (before, after) == ([], [RUNS[0]])


async def test_a_batch_refused_as_stale_keeps_no_check_of_the_run_it_would_end(
    store: Store, tables: Tables
) -> None:
    writer = await store.create(header())
    ended = TURN_EVENTS - 3
    writer.append(EVENTS[:ended])
    await writer.flush()
    # Another writer (past the claim) appended meanwhile: the stored next seq moved on.
    tables.run("UPDATE {t}sessions SET next_seq = ? WHERE id = ?", ended + 1, SID)
    writer.append(EVENTS[ended : ended + 1])
    with pytest.raises(StaleWriter):
        await writer.flush()
    await writer.close()

    assert tables.runs() == []


async def test_a_continuation_keeps_each_steps_rows_as_one_packed_run(store: Store) -> None:
    await write_streamed(store)

    assert await packed_runs(store) == RUNS


async def test_a_store_that_writes_each_chunk_as_a_row_keeps_its_runs_packed_too(
    engine: str, where: str
) -> None:
    store = open_engine(engine, where, pack=False)
    try:
        await write_streamed(store)
        opened = await store.open(SID, 0)
        await opened.writer.close()
    finally:
        await store.aclose()

    packed = [(r.seq0, r.count) for r in opened.log.records_from(0) if type(r) is PackedChunks]
    assert packed == RUNS
    assert opened.log.events() == EVENTS


async def test_a_trusted_load_reads_as_the_decoded_load(store: Store) -> None:
    await write_streamed(store)
    decoded = await store.read(SID)
    opened = await store.open(SID, 0)
    await opened.writer.close()

    assert opened.log.events() == decoded.events == EVENTS
    assert project_load(opened.log.records_from(0)) == project_load(decoded.records)


async def test_appends_after_a_continuation_keep_checks_of_the_runs_they_end(
    store: Store, tables: Tables
) -> None:
    await write_streamed(store)
    more = streamed_turn(2, 2 * TURN_EVENTS, DELTAS)
    writer = (await store.open(SID, 0)).writer
    for start in range(0, len(more), 10):
        writer.append(more[start : start + 10])
        await writer.flush()
    await writer.close()

    assert tables.runs() == [*RUNS, (2 * TURN_EVENTS + 3, RUN)]
    assert await packed_runs(store) == [*RUNS, (2 * TURN_EVENTS + 3, RUN)]


@pytest.mark.parametrize("turn", [0, 1])
async def test_a_row_changed_under_its_check_makes_the_session_unloadable_naming_its_line(
    store: Store, tables: Tables, turn: int
) -> None:
    await write_streamed(store)
    line, seq0, body = first_row(tables, turn)
    tampered = body.replace('"dt":[', '"dt":[1,', 1)
    assert tampered != body
    tables.run("UPDATE {t}records SET body = ?{json} WHERE seq0 = ?", tampered, seq0)

    with pytest.raises(CorruptLog) as caught:
        await store.open(SID, 0)

    assert caught.value.line == line
    assert "dt has" in caught.value.reason


async def test_rows_without_checks_are_decoded_and_their_checks_kept_for_the_next_load(
    store: Store, tables: Tables
) -> None:
    await write_streamed(store)
    tables.run("DELETE FROM {t}checks")

    opened = await store.open(SID, 0)
    await opened.writer.close()

    assert opened.log.events() == EVENTS
    assert tables.runs() == RUNS
    assert await packed_runs(store) == RUNS


async def test_a_stale_check_costs_the_run_a_decode_and_is_replaced(
    store: Store, tables: Tables
) -> None:
    await write_streamed(store)
    kept = tables.checks()
    wrong = msgspec.structs.replace(kept[0], crc=kept[0].crc ^ 1)
    tables.run(
        "UPDATE {t}checks SET chunk_check = ? WHERE line = ?",
        msgspec.json.encode(wrong).decode(),
        wrong.line,
    )
    tables.run("INSERT INTO {t}checks VALUES (?, 1, '[not a check')", SID)  # unreadable

    opened = await store.open(SID, 0)
    await opened.writer.close()

    assert opened.log.events() == EVENTS
    assert tables.checks() == kept


async def test_a_copy_keeps_the_checks_of_the_runs_it_holds(store: Store, tables: Tables) -> None:
    await write_streamed(store)
    parent = await store.read(SID)
    await store.write_copy(header("c"), parent.records)

    assert tables.runs("c") == RUNS
    assert await packed_runs(store, "c") == RUNS


async def test_a_fork_cut_inside_a_run_keeps_checks_of_the_runs_it_holds(
    store: Store, tables: Tables
) -> None:
    await write_streamed(store)
    parent = await store.read(SID)
    # Through the second step's 100th delta: the fork's log ends that run with its own events.
    through = TURN_EVENTS + 3 + 100
    opened = await fork_stored(store, parent, through, header("f"), 0)
    await opened.writer.close()

    assert opened.log.events()[: through + 1] == EVENTS[: through + 1]
    assert tables.runs("f") == [RUNS[0], (TURN_EVENTS + 3, 101)]
    assert await packed_runs(store, "f") == [RUNS[0], (TURN_EVENTS + 3, 101)]


async def test_deleting_a_session_deletes_its_checks(store: Store, tables: Tables) -> None:
    await write_streamed(store)
    await store.delete(SID)

    assert tables.run("SELECT count(*) FROM {t}checks") == [(0,)]


async def test_a_version_3_database_is_upgraded_and_its_sessions_load(
    engine: str, where: str, tables: Tables
) -> None:
    first = open_engine(engine, where)
    await write_streamed(first)
    await first.aclose()
    as_version(tables.run, tables.prefix, 3)

    store = open_engine(engine, where)
    try:
        opened = await store.open(SID, 0)
        await opened.writer.close()
        packed = await packed_runs(store)
    finally:
        await store.aclose()

    assert opened.log.events() == EVENTS
    assert tables.run("SELECT value FROM {t}store WHERE key = 'schema_version'") == [(5,)]
    assert tables.runs() == RUNS
    assert packed == RUNS
