"""The model's title in the background (SPEC 4.4), over a live session of the registry: a title
set while the call runs wins, a title that arrives while a turn runs waits for that turn's end,
and a session closed before the call answers gets the first prompt's line. The fake provider
answers when the test lets it, so nothing depends on timing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.agent.ports import ClientCapabilities
from acp_server.core.acp_updates import SessionInfoUpdate, SessionNotification
from acp_server.core.content import TextContent
from acp_server.core.events import (
    SessionTitle,
    SessionTitleData,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.lifecycle import title_change
from acp_server.core.stream import StreamChunk, TextDelta, Usage, UsageChunk
from acp_server.providers.base import ModelRequest
from acp_server.server.live import LiveSession
from acp_server.server.sessions import SessionRegistry
from acp_server.server.surface import Surface, SurfaceConfig
from acp_server.server.titles import Titles
from acp_server.storage.url import StoreUrl, open_store

pytestmark = pytest.mark.anyio


class GatedModel:
    """Answers "Parser tabs" once `answer` is set; records each request."""

    name = "gated"

    def __init__(self) -> None:
        self.answer = anyio.Event()
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        await self.answer.wait()
        yield TextDelta(0, "Parser tabs")
        yield UsageChunk(Usage(30, 3))


class Client:
    capabilities = ClientCapabilities()

    def __init__(self) -> None:
        self.shown: list[Any] = []

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError(f"no request expected: {method}")

    async def notify(self, method: str, params: Any) -> None:
        assert isinstance(params, SessionNotification)
        self.shown.append(params.update)

    async def notify_all(self, method: str, params: Iterable[Any]) -> None:
        for value in params:
            await self.notify(method, value)


class RunningTurn:
    """Stands for a prompt turn in progress."""

    def cancel(self) -> None:
        pass


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[SessionRegistry]:
    store = open_store(StoreUrl("jsonl", tmp_path / "sessions", str(tmp_path / "sessions")))
    await store.prepare()
    registry = SessionRegistry(store)
    try:
        yield registry
    finally:
        await registry.close_all()
        await store.aclose()


async def first_turn(registry: SessionRegistry) -> LiveSession:
    """A live session whose first model turn completed."""
    session = await registry.create("/work", additional_directories=[], mcp_servers=[])
    rec = session.recorder
    rec.append(TurnStart, TurnStartData(0))
    message = UserMessage("user-0", [TextContent("Fix the parser\nIt fails on tabs.")])
    rec.append(UserMessageEvent, UserMessageData(0, message))
    rec.append(TurnEnd, TurnEndData(0, TurnEndReasonCompleted()))
    return session


def titles_in(session: LiveSession) -> list[SessionTitleData]:
    return [e.data for e in session.log.plain_events() if type(e) is SessionTitle]


async def test_the_models_title_is_written_with_its_usage_once_it_answers(
    registry: SessionRegistry,
) -> None:
    model, client = GatedModel(), Client()
    session = await first_turn(registry)
    async with anyio.create_task_group() as background:
        titles = Titles("model", model, Surface(SurfaceConfig(), client), background.start_soon)
        await titles.after_turn(session)
        assert titles_in(session) == []  # the turn answers before the title
        model.answer.set()
    assert titles_in(session) == [SessionTitleData("Parser tabs", Usage(30, 3))]
    assert client.shown == [SessionInfoUpdate("Parser tabs")]
    [request] = model.requests
    assert (request.tools, request.max_tokens) == ([], 64)


async def test_a_title_set_while_the_call_runs_wins(registry: SessionRegistry) -> None:
    model, client = GatedModel(), Client()
    session = await first_turn(registry)
    async with anyio.create_task_group() as background:
        titles = Titles("model", model, Surface(SurfaceConfig(), client), background.start_soon)
        await titles.after_turn(session)
        await registry.amend(session.id, SessionTitle, lambda log: title_change(log, "Mine"))
        model.answer.set()
    assert titles_in(session) == [SessionTitleData("Mine")]
    assert client.shown == []


async def test_a_title_that_arrives_while_a_turn_runs_is_written_when_it_ends(
    registry: SessionRegistry,
) -> None:
    model, client = GatedModel(), Client()
    session = await first_turn(registry)
    async with anyio.create_task_group() as background:
        titles = Titles("model", model, Surface(SurfaceConfig(), client), background.start_soon)
        await titles.after_turn(session)
        session.turn = RunningTurn()  # type: ignore[assignment]  # a stand-in for a turn
        model.answer.set()
    assert (titles_in(session), session.pending_title) == (
        [],
        SessionTitleData("Parser tabs", Usage(30, 3)),
    )
    session.turn = None
    await titles.after_turn(session)  # the running turn's end: no second call
    assert titles_in(session) == [SessionTitleData("Parser tabs", Usage(30, 3))]
    assert client.shown == [SessionInfoUpdate("Parser tabs")]
    assert len(model.requests) == 1


async def test_a_session_closed_before_the_call_answers_gets_the_prompts_line(
    registry: SessionRegistry,
) -> None:
    model, client = GatedModel(), Client()
    session = await first_turn(registry)
    async with anyio.create_task_group() as background:
        titles = Titles("model", model, Surface(SurfaceConfig(), client), background.start_soon)
        await titles.after_turn(session)
        await anyio.wait_all_tasks_blocked()  # the call waits for its answer
        await registry.close(session.id)
    stored = (await registry.store.read(session.id)).events
    assert [e.data for e in stored if type(e) is SessionTitle] == [
        SessionTitleData("Fix the parser")
    ]
