"""`Store.list_page`'s contract (`session/list`, SPEC 3.5), one suite over every engine: newest
first by createdAt then id, pages that continue from `next_after` with nothing skipped or
repeated, the cwd filter, the archive filter, subagent sessions never listed, deleted sessions
gone; then what each engine does to read only the page: the JSONL list index (kept by the
store's own changes, rebuilt when missing or stale, corrected when a log says otherwise) and
the SQL engines' list columns and indexes (schema version 5, filled by the upgrade from 3).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from schema_versions import as_version

from acp_server.core.events import (
    SessionArchived,
    SessionArchivedData,
    SessionTitle,
    SessionTitleData,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.storage.api import ArchiveFilter, ListedPage, ListPosition, Store
from acp_server.storage.jsonl import list_index
from acp_server.storage.jsonl.list_index import (
    INDEX_NAME,
    Archived,
    Created,
    Deleted,
    Line,
    read_back,
)
from acp_server.storage.jsonl.sessions import SessionStore
from acp_server.storage.jsonl.store import JsonlStore
from acp_server.storage.sql.postgres import PostgresStore
from acp_server.storage.sql.sqlite import SqliteStore
from acp_server.storage.url import StoreUrl, open_store, parse_store_url

pytestmark = pytest.mark.anyio

ENGINES = ["jsonl", "sqlite", pytest.param("postgresql", marks=pytest.mark.process)]


@pytest.fixture(params=ENGINES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUrl:
    if request.param == "postgresql":
        return parse_store_url(request.getfixturevalue("postgres_url"))
    if request.param == "sqlite":
        return StoreUrl("sqlite", tmp_path / "sessions.db", f"sqlite://{tmp_path}/sessions.db")
    return StoreUrl("jsonl", tmp_path / "sessions", str(tmp_path / "sessions"))


@pytest.fixture
async def store(url: StoreUrl) -> AsyncIterator[Store]:
    opened = open_store(url)
    try:
        yield opened
    finally:
        await opened.aclose()


def header(session_id: str, created_at: int, cwd: str = "/work", **more: Any) -> SessionHeader:
    return SessionHeader(
        version=SESSION_FORMAT_VERSION, id=session_id, created_at=created_at, cwd=cwd, **more
    )


async def create(store: Store, session_id: str, created_at: int, **more: Any) -> None:
    writer = await store.create(header(session_id, created_at, **more))
    await writer.close()


async def archive(store: Store, session_id: str, archived: bool = True) -> None:
    writer = (await store.open(session_id, 50_000)).writer
    writer.append([SessionArchived(writer.next_seq, 50_000, SessionArchivedData(archived))])
    await writer.close()


async def page_ids(
    store: Store,
    *,
    cwd: str | None = None,
    after: ListPosition | None = None,
    limit: int = 100,
    archived: ArchiveFilter = "exclude",
) -> list[str]:
    page = await store.list_page(cwd, after, limit, archived)
    return [item.header.id for item in page.sessions]


async def every_page(store: Store, limit: int, cwd: str | None = None) -> list[ListedPage]:
    pages = [await store.list_page(cwd, None, limit, "exclude")]
    while (after := pages[-1].next_after) is not None:
        pages.append(await store.list_page(cwd, after, limit, "exclude"))
    return pages


# -- the contract --------------------------------------------------------------------------------


async def test_a_page_is_newest_first_by_creation_then_id(store: Store) -> None:
    for session_id, created_at in [("b", 2000), ("a", 3000), ("c", 1000), ("d", 3000)]:
        await create(store, session_id, created_at)
    page = await store.list_page(None, None, 10, "exclude")
    assert ([item.header.id for item in page.sessions], page.next_after) == (
        ["d", "a", "b", "c"],
        None,
    )


async def test_pages_continue_from_where_the_last_ended_with_nothing_skipped_or_repeated(
    store: Store,
) -> None:
    for n in range(25):
        await create(store, f"s{n:02d}", 1000 + n // 2)  # pairs share a createdAt
    pages = await every_page(store, 10)
    assert [len(page.sessions) for page in pages] == [10, 10, 5]
    assert [page.next_after for page in pages] == [(1007, "s15"), (1002, "s05"), None]
    listed = [item.header.id for page in pages for item in page.sessions]
    assert listed == [f"s{n:02d}" for n in reversed(range(25))]


async def test_a_session_created_while_paging_does_not_shift_the_next_page(store: Store) -> None:
    for n in range(6):
        await create(store, f"s{n}", 1000 + n)
    first = await store.list_page(None, None, 3, "exclude")
    await create(store, "newest", 9000)
    assert await page_ids(store, after=first.next_after, limit=3) == ["s2", "s1", "s0"]


async def test_the_cwd_filter_keeps_that_directory_however_it_is_spelled(store: Store) -> None:
    await create(store, "here", 1000, cwd="/a/b")
    await create(store, "dotted", 2000, cwd="/a/./b/")
    await create(store, "below", 3000, cwd="/a/b/c")
    await create(store, "elsewhere", 4000, cwd="/z")
    assert await page_ids(store, cwd="/a/b") == ["dotted", "here"]
    assert await page_ids(store, cwd="/a//b/.") == ["dotted", "here"]
    assert await page_ids(store, cwd="/nothing") == []


async def test_the_cwd_filter_pages_too(store: Store) -> None:
    for n in range(9):
        await create(store, f"s{n}", 1000 + n, cwd="/p" if n % 2 else "/q")
    pages = await every_page(store, 2, cwd="/p")
    assert [[item.header.id for item in page.sessions] for page in pages] == [
        ["s7", "s5"],
        ["s3", "s1"],
    ]


async def test_the_archive_filter_chooses_before_paging(store: Store) -> None:
    for n in range(5):
        await create(store, f"s{n}", 1000 + n)
    await archive(store, "s3")
    await archive(store, "s1")
    await archive(store, "s1", False)
    assert await page_ids(store, archived="exclude") == ["s4", "s2", "s1", "s0"]
    assert await page_ids(store, archived="only") == ["s3"]
    assert await page_ids(store, archived="include") == ["s4", "s3", "s2", "s1", "s0"]
    page = await store.list_page(None, None, 2, "exclude")
    assert ([item.header.id for item in page.sessions], page.next_after) == (
        ["s4", "s2"],
        (1002, "s2"),
    )
    flags = [item.archived for item in (await store.list_page(None, None, 9, "include")).sessions]
    assert flags == [False, True, False, False, False]


async def test_subagent_sessions_are_never_listed(store: Store) -> None:
    await create(store, "parent", 1000)
    await create(store, "child", 2000, parent_session="parent", origin="subagent")
    for archived in ("exclude", "include"):
        assert await page_ids(store, archived=archived) == ["parent"]  # type: ignore[arg-type]


async def test_a_deleted_session_leaves_the_pages(store: Store) -> None:
    for n in range(4):
        await create(store, f"s{n}", 1000 + n)
    first = await store.list_page(None, None, 2, "exclude")
    await store.delete("s1")
    assert await page_ids(store) == ["s3", "s2", "s0"]
    assert await page_ids(store, after=first.next_after) == ["s0"]


async def test_a_page_shows_the_title_last_event_time_and_header(store: Store) -> None:
    writer = await store.create(header("s1", 1000, cwd="/w", additional_directories=["/x"]))
    writer.append([SessionTitle(0, 7000, SessionTitleData("Named"))])
    await writer.close()
    (item,) = (await store.list_page(None, None, 10, "exclude")).sessions
    assert (item.header, item.title, item.updated_at, item.archived, item.summarized) == (
        header("s1", 1000, cwd="/w", additional_directories=["/x"]),
        "Named",
        7000,
        False,
        True,
    )


async def test_another_store_on_the_same_place_sees_each_change(url: StoreUrl) -> None:
    """Two processes on one store: what one changes, the other's next page shows."""
    first, second = open_store(url), open_store(url)
    try:
        await create(first, "a", 1000)
        assert await page_ids(second) == ["a"]
        await create(first, "b", 2000)
        await archive(first, "a")
        assert await page_ids(second) == ["b"]
        await first.delete("b")
        assert await page_ids(second, archived="include") == ["a"]
    finally:
        await first.aclose()
        await second.aclose()


# -- JSONL: the list index -----------------------------------------------------------------------


def created(n: int, top: int | None = None, **more: Any) -> Created:
    fields = {"cwd": "/w", "subagent": False, "archived": False, **more}
    position = (1000 + (n if top is None else top), f"s{n if top is None else top}")
    return Created(f"s{n}", 1000 + n, top=position, **fields)


def test_reading_back_takes_only_the_lines_the_page_needs() -> None:
    lines = [created(n) for n in range(1000)]
    taken: list[Line] = []

    def back() -> Iterator[Line]:
        for line in reversed(lines):
            taken.append(line)
            yield line

    page = read_back(back(), None, None, "exclude", 3)
    assert ([line.id for line in page], len(taken)) == (["s999", "s998", "s997"], 4)


def test_reading_back_finds_a_newer_session_whose_line_came_earlier() -> None:
    # s5 was copied in early with a later createdAt: the tops after it say so.
    lines = [created(0), created(5), created(1, top=5), created(2, top=5), created(3, top=5)]
    page = read_back(reversed(lines), None, None, "exclude", 2)
    assert [line.id for line in page] == ["s5", "s3"]


def test_reading_back_the_last_line_about_a_session_decides() -> None:
    lines: list[Line] = [
        created(0),
        created(1),
        Deleted("s1", top=(1001, "s1")),
        created(1),  # made again with the same id
        created(2),
        Archived("s2", True, top=(1002, "s2")),
        Archived("s0", True, top=(1002, "s2")),
        Archived("s0", False, top=(1002, "s2")),
    ]
    page = read_back(reversed(lines), None, None, "include", 10)
    assert [(line.id, line.archived) for line in page] == [
        ("s2", True),
        ("s1", False),
        ("s0", False),
    ]


async def jsonl_store(root: Path, sessions: int) -> JsonlStore:
    """A store of `sessions` sessions, its index built first (by a page of the empty root)
    and then kept by the store as it creates them."""
    store = JsonlStore(root)
    await store.prepare()
    await store.list_page(None, None, 1, "exclude")
    for n in range(sessions):
        await create(store, f"s{n:03d}", 1000 + n)
    return store


def counting_headers(store: JsonlStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the sessions whose header the store reads from now on."""
    read: list[str] = []
    real = store.files.header

    def counted(session_id: str) -> SessionHeader:
        read.append(session_id)
        return real(session_id)

    monkeypatch.setattr(store.files, "header", counted)
    return read


async def test_jsonl_a_page_reads_the_logs_of_its_sessions_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await jsonl_store(tmp_path, 120)
    await create(store, "s120", 1120)  # kept by the store: nothing to rebuild
    read = counting_headers(store, monkeypatch)
    page = await store.list_page(None, (1100, "s100"), 5, "exclude")
    assert [item.header.id for item in page.sessions] == ["s099", "s098", "s097", "s096", "s095"]
    assert read == ["s099", "s098", "s097", "s096", "s095"]


async def test_jsonl_the_index_is_read_back_across_its_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await jsonl_store(tmp_path, 60)
    await store.delete("s030")
    monkeypatch.setattr(list_index, "READ_BACK_BLOCK", 150)  # a line or two a block
    pages = await every_page(store, 7)
    listed = [item.header.id for page in pages for item in page.sessions]
    assert listed == [f"s{n:03d}" for n in reversed(range(60)) if n != 30]


async def test_jsonl_a_missing_index_is_rebuilt_from_the_logs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await jsonl_store(tmp_path, 3)
    await archive(store, "s001")
    (tmp_path / INDEX_NAME).unlink()
    fresh = JsonlStore(tmp_path)
    read = counting_headers(fresh, monkeypatch)
    assert await page_ids(fresh, archived="include") == ["s002", "s001", "s000"]
    assert await page_ids(fresh, archived="only") == ["s001"]
    assert sorted(set(read)) == ["s000", "s001", "s002"]  # the rebuild read every header
    read.clear()
    assert await page_ids(JsonlStore(tmp_path), limit=1) == ["s002"]
    assert read == []  # another store reads the rebuilt index: no rebuild


async def test_jsonl_a_session_made_outside_the_store_makes_the_index_stale(
    tmp_path: Path,
) -> None:
    store = await jsonl_store(tmp_path, 2)
    assert await page_ids(store) == ["s001", "s000"]
    SessionStore(tmp_path).create(header("outside", 5000)).close()  # another build, say
    assert await page_ids(store) == ["outside", "s001", "s000"]


async def test_jsonl_a_session_made_during_the_rebuild_leaves_the_page_as_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await jsonl_store(tmp_path, 2)
    (tmp_path / INDEX_NAME).unlink()
    real = store.list_index.scan

    def scanned_then_made() -> Iterator[Created]:
        lines = list(real())
        # Another process makes a session once the rebuild has read the root.
        SessionStore(tmp_path).create(header("meanwhile", 5000)).close()
        return iter(lines)

    monkeypatch.setattr(store.list_index, "scan", scanned_then_made)
    assert await page_ids(store) == ["s001", "s000"]
    monkeypatch.setattr(store.list_index, "scan", real)
    assert await page_ids(store) == ["meanwhile", "s001", "s000"]  # stale again: rebuilt


async def test_jsonl_a_session_removed_outside_the_store_leaves_the_pages(tmp_path: Path) -> None:
    store = await jsonl_store(tmp_path, 3)
    assert await page_ids(store) == ["s002", "s001", "s000"]
    SessionStore(tmp_path).delete("s001")
    assert await page_ids(store) == ["s002", "s000"]


async def test_jsonl_a_torn_index_line_is_repaired(tmp_path: Path) -> None:
    store = await jsonl_store(tmp_path, 2)
    with (tmp_path / INDEX_NAME).open("ab") as index:
        index.write(b'["created","s9')  # a line cut short by a crash
    await create(store, "s002", 3000)  # its line lands after the torn one
    assert await page_ids(JsonlStore(tmp_path)) == ["s002", "s001", "s000"]
    assert (tmp_path / INDEX_NAME).read_bytes().count(b"s9") == 0  # rewritten whole


async def test_jsonl_an_archive_change_the_index_missed_is_corrected_when_read(
    tmp_path: Path,
) -> None:
    store = await jsonl_store(tmp_path, 3)
    # Archived by a writer that does not keep the index (another build, say).
    continued = SessionStore(tmp_path).continue_session("s001", 50_000)
    continued.writer.append([SessionArchived(0, 50_000, SessionArchivedData(True))])
    continued.writer.sync()
    continued.writer.close()
    assert await page_ids(store, archived="only") == []  # the index alone does not know yet
    assert await page_ids(store) == ["s002", "s000"]  # the page read the log, and says so
    assert await page_ids(store, archived="only") == ["s001"]
    assert await page_ids(JsonlStore(tmp_path), archived="only") == ["s001"]


async def test_jsonl_a_root_not_made_yet_lists_nothing_and_is_left_unmade(tmp_path: Path) -> None:
    page = await JsonlStore(tmp_path / "later").list_page(None, None, 10, "exclude")
    assert (page, (tmp_path / "later").exists()) == (ListedPage([], None), False)


async def test_jsonl_a_copy_is_indexed_with_its_archive_state(tmp_path: Path) -> None:
    store = JsonlStore(tmp_path)
    await store.write_copy(header("copy", 1000), [SessionArchived(0, 1, SessionArchivedData(True))])
    assert await page_ids(store, archived="only") == ["copy"]


# -- SQL: the list columns and indexes, and the upgrade from version 3 ------------------------


def sqlite_plan(path: Path, cwd: str | None) -> str:
    from acp_server.storage.sql.sqlite import _sql

    query, params = _sql.page(cwd, (5000, "z"), 100, "exclude")
    db = sqlite3.connect(path)
    try:
        return " | ".join(row[3] for row in db.execute(f"EXPLAIN QUERY PLAN {query}", params))
    finally:
        db.close()


async def test_sqlite_a_page_is_read_through_an_index_in_its_order(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "sessions.db")
    await create(store, "s1", 1000)
    await store.aclose()
    assert sqlite_plan(tmp_path / "sessions.db", None) == (
        "SEARCH sessions USING INDEX sessions_by_created ((created_at,id)<(?,?))"
    )
    assert sqlite_plan(tmp_path / "sessions.db", "/work") == (
        "SEARCH sessions USING INDEX sessions_by_cwd (cwd=? AND (created_at,id)<(?,?))"
    )


async def sessions_of_version_3(store: Store) -> None:
    await create(store, "here", 1000, cwd="/a/./b")
    await create(store, "there", 2000, cwd="/c")
    await create(store, "child", 3000, cwd="/a/b", parent_session="here", origin="subagent")
    await store.aclose()


async def upgraded_pages(store: Store) -> tuple[list[str], list[str], list[str]]:
    try:
        return (
            await page_ids(store),
            await page_ids(store, cwd="/a/b"),
            await page_ids(store, cwd="/c"),
        )
    finally:
        await store.aclose()


async def test_sqlite_a_database_of_version_3_is_upgraded_with_its_list_columns_filled(
    tmp_path: Path,
) -> None:
    await sessions_of_version_3(SqliteStore(tmp_path / "sessions.db"))
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    as_version(db.execute, "", 3)
    db.close()
    pages = await upgraded_pages(SqliteStore(tmp_path / "sessions.db"))
    assert pages == (["there", "here"], ["here"], ["there"])
    db = sqlite3.connect(tmp_path / "sessions.db", isolation_level=None)
    version = db.execute("SELECT value FROM store WHERE key = 'schema_version'").fetchone()
    db.close()
    assert version == (5,)
    assert "USING INDEX sessions_by_cwd" in sqlite_plan(tmp_path / "sessions.db", "/c")


@pytest.mark.process
async def test_postgresql_a_database_of_version_3_is_upgraded_with_its_list_columns_filled(
    postgres_url: str,
) -> None:
    import psycopg

    def execute(statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            cur = conn.execute(statement.encode())
            return cur.fetchall() if cur.description else []

    await sessions_of_version_3(PostgresStore(postgres_url))
    as_version(execute, "acp_", 3)
    pages = await upgraded_pages(PostgresStore(postgres_url))
    assert pages == (["there", "here"], ["here"], ["there"])
    assert execute("SELECT value FROM acp_store WHERE key = 'schema_version'") == [(5,)]
    indexes = execute(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'acp_sessions' ORDER BY indexname"
    )
    assert indexes == [
        ("acp_sessions_by_created",),
        ("acp_sessions_by_cwd",),
        ("acp_sessions_pkey",),
    ]


@pytest.mark.process
async def test_postgresql_a_page_is_read_on_a_standby_in_step_else_on_the_primary(
    postgres_pair: Any,
) -> None:
    store = PostgresStore(postgres_pair.url, read_url=postgres_pair.standby.url)
    try:
        await create(store, "first", 1000)
        await anyio.to_thread.run_sync(postgres_pair.wait_in_step)
        on_standby = await page_ids(store)
        await anyio.to_thread.run_sync(postgres_pair.pause_replay)
        await create(store, "second", 2000)
        on_primary = await page_ids(store)
        await anyio.to_thread.run_sync(postgres_pair.resume_replay)
        assert store.standby is not None
        assert (on_standby, on_primary, store.standby.counts) == (
            ["first"],
            ["second", "first"],
            {"standby": 1, "behind": 1},
        )
    finally:
        await store.aclose()
