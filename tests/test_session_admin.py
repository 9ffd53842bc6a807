"""`session/set_title`, `session/status`, `session/archive` and `session/unarchive` over the
session registry, on every store engine: each change is an event at the end of the session's
log, whether the session is live here or only stored; `session/list` leaves archived sessions
out unless asked for them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from acp_server.core.events import (
    SessionArchived,
    SessionArchivedData,
    SessionEvent,
    SessionTitle,
    SessionTitleData,
)
from acp_server.core.lifecycle import archive_change, title_change
from acp_server.server.errors import SessionInUse, UnknownSession
from acp_server.server.live import LiveSession
from acp_server.server.sessions import SessionRegistry
from acp_server.storage.url import StoreUrl, open_store, parse_store_url

pytestmark = pytest.mark.anyio

ENGINES = ["jsonl", "sqlite", pytest.param("postgresql", marks=pytest.mark.process)]


@pytest.fixture(params=ENGINES)
async def registry(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[SessionRegistry]:
    if request.param == "postgresql":
        url = parse_store_url(request.getfixturevalue("postgres_url"))
    elif request.param == "sqlite":
        url = StoreUrl("sqlite", tmp_path / "s.db", f"sqlite://{tmp_path}/s.db")
    else:
        url = StoreUrl("jsonl", tmp_path / "sessions", str(tmp_path / "sessions"))
    store = open_store(url)
    await store.prepare()
    ids = iter(f"s{n}" for n in range(100))
    registry = SessionRegistry(store, clock=lambda: 1_000, new_id=lambda: next(ids))
    try:
        yield registry
    finally:
        await registry.close_all()
        await store.aclose()


async def stored_session(registry: SessionRegistry) -> str:
    """A new session, closed again: only stored."""
    session = await registry.create("/work", additional_directories=[], mcp_servers=[])
    await registry.close(session.id)
    return session.id


async def events(registry: SessionRegistry, session_id: str) -> list[SessionEvent]:
    return (await registry.store.read(session_id)).events


def titled(title: str) -> Any:
    return lambda log: title_change(log, title)


def archived(value: bool) -> Any:
    return lambda log: archive_change(log, value)


class RunningTurn:
    """Stands for a prompt turn in progress: what closing a session pulls on."""

    number = 3

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


async def test_a_title_set_on_a_session_only_stored_is_a_title_event_at_its_end(
    registry: SessionRegistry,
) -> None:
    session_id = await stored_session(registry)
    event = await registry.amend(session_id, SessionTitle, titled("Fix the parser"))
    assert await events(registry, session_id) == [
        SessionTitle(0, 1_000, SessionTitleData("Fix the parser"))
    ]
    assert (event, session_id in registry.live) == (
        SessionTitle(0, 1_000, SessionTitleData("Fix the parser")),
        False,
    )


async def test_a_title_set_on_a_live_session_goes_through_its_log(
    registry: SessionRegistry,
) -> None:
    session = await registry.create("/work", additional_directories=[], mcp_servers=[])
    await registry.amend(session.id, SessionTitle, titled("Live"))
    # The recorder stamps events with its own clock: the time is not compared.
    assert [(type(e), e.seq, e.data) for e in session.log.plain_events()] == [
        (SessionTitle, 0, SessionTitleData("Live"))
    ]
    assert [(i.header.id, i.title) for i in await registry.store.list_sessions()] == [
        (session.id, "Live")
    ]


async def test_the_title_a_session_has_appends_nothing(registry: SessionRegistry) -> None:
    session_id = await stored_session(registry)
    await registry.amend(session_id, SessionTitle, titled("Same"))
    again = await registry.amend(session_id, SessionTitle, titled("Same"))
    assert (again, len(await events(registry, session_id))) == (None, 1)


async def test_a_title_for_a_session_whose_turn_runs_is_refused_as_in_use(
    registry: SessionRegistry,
) -> None:
    session = await registry.create("/work", additional_directories=[], mcp_servers=[])
    session.turn = RunningTurn()  # type: ignore[assignment]  # a stand-in for a turn
    with pytest.raises(SessionInUse, match="a prompt turn is running"):
        await registry.amend(session.id, SessionTitle, titled("Busy"))
    session.turn = None
    assert list(session.log.plain_events()) == []


async def test_an_unknown_session_is_unknown_to_every_change_and_to_status(
    registry: SessionRegistry,
) -> None:
    with pytest.raises(UnknownSession):
        await registry.amend("nobody", SessionTitle, titled("x"))
    with pytest.raises(UnknownSession):
        await registry.amend("nobody", SessionArchived, archived(True), close_live=True)
    with pytest.raises(UnknownSession):
        await registry.status("nobody")


async def test_status_is_the_live_session_while_it_is_live_and_none_once_only_stored(
    registry: SessionRegistry,
) -> None:
    session = await registry.create("/work", additional_directories=[], mcp_servers=[])
    live = await registry.status(session.id)
    await registry.close(session.id)
    assert (live, await registry.status(session.id)) == (session, None)


async def test_status_changes_nothing(registry: SessionRegistry) -> None:
    session_id = await stored_session(registry)
    await registry.status(session_id)
    assert (session_id in registry.live, await events(registry, session_id)) == (False, [])


async def test_archiving_a_live_session_cancels_its_turn_closes_it_then_archives_it(
    registry: SessionRegistry,
) -> None:
    session: LiveSession = await registry.create("/work", additional_directories=[], mcp_servers=[])
    turn = RunningTurn()
    session.turn = turn  # type: ignore[assignment]  # a stand-in for a turn
    await registry.amend(session.id, SessionArchived, archived(True), close_live=True)
    assert (turn.cancelled, session.id in registry.live, session.writer.closed) == (
        True,
        False,
        True,
    )
    assert await events(registry, session.id) == [
        SessionArchived(0, 1_000, SessionArchivedData(True))
    ]


async def test_archiving_an_archived_session_succeeds_and_appends_nothing(
    registry: SessionRegistry,
) -> None:
    session_id = await stored_session(registry)
    await registry.amend(session_id, SessionArchived, archived(True), close_live=True)
    again = await registry.amend(session_id, SessionArchived, archived(True), close_live=True)
    assert (again, len(await events(registry, session_id))) == (None, 1)


async def test_archived_sessions_are_listed_only_when_asked_for(
    registry: SessionRegistry,
) -> None:
    kept = await stored_session(registry)
    gone = await stored_session(registry)
    await registry.amend(gone, SessionArchived, archived(True), close_live=True)
    listed = {
        wanted: [
            (info.session_id, info.archived)
            for info in (await registry.list(None, None, wanted)).sessions
        ]
        for wanted in ("exclude", "include", "only")
    }
    assert listed == {
        "exclude": [(kept, False)],
        "include": [(gone, True), (kept, False)],
        "only": [(gone, True)],
    }


async def test_unarchiving_returns_the_session_to_the_list_without_opening_it(
    registry: SessionRegistry,
) -> None:
    session_id = await stored_session(registry)
    await registry.amend(session_id, SessionArchived, archived(True), close_live=True)
    await registry.amend(session_id, SessionArchived, archived(False))
    assert [(i.session_id, i.archived) for i in (await registry.list(None, None)).sessions] == [
        (session_id, False)
    ]
    assert (session_id in registry.live, await events(registry, session_id)) == (
        False,
        [
            SessionArchived(0, 1_000, SessionArchivedData(True)),
            SessionArchived(1, 1_000, SessionArchivedData(False)),
        ],
    )
