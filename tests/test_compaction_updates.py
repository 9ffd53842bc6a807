"""Compaction in protocol form and notices from the agent loop (SPEC 1.2, 4.6, 4.7), in process.

A turn runs the real loop over a scripted provider and an in-memory client: a client that
advertised `session.compaction` sees each compaction as `compaction_update`s and
`compaction_summary_chunk`s, one that advertised `session.notices` sees `notice`s, and every
notice is a `session/notice` event in the log whoever is connected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from acp_server.agent.failures import ModelRequestFailed
from acp_server.agent.loop import Turn
from acp_server.agent.ports import ClientCapabilities
from acp_server.agent.recorder import SessionRecorder
from acp_server.agent.tools import ToolContext
from acp_server.agent.turn_env import TurnEnv
from acp_server.core.content import TextContent
from acp_server.core.event_log import EventLog
from acp_server.core.events import encode_event
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.messages import AssistantTurn, UserTurn, derive_messages
from acp_server.core.stream import (
    AssistantText,
    BlockEnd,
    BlockStart,
    Finish,
    StreamChunk,
    TextDelta,
    Usage,
    UsageChunk,
)
from acp_server.providers.base import ModelRequest, ProviderError, RetryReport
from acp_server.storage.jsonl.store import JsonlStore

pytestmark = pytest.mark.anyio

COMPACTION: Any = {"compaction": True}
NOTICES: Any = {"notices": True}

Entry = Callable[[ModelRequest], AsyncIterator[StreamChunk]]


def answer(text: str, used: tuple[int, int] = (10, 2), pieces: int = 1) -> Entry:
    """A model call answering `text` (in `pieces` deltas) with that usage."""

    async def stream(request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield BlockStart(0, "text")
        size = -(-len(text) // pieces)
        for k in range(0, len(text), size):
            yield TextDelta(0, text[k : k + size])
        yield BlockEnd(0)
        yield UsageChunk(Usage(*used))
        yield Finish("stop")

    return stream


def hang_after(text: str) -> Entry:
    """A model call that streams `text`, then waits until it is cancelled."""

    async def stream(request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield BlockStart(0, "text")
        yield TextDelta(0, text)
        await anyio.sleep_forever()

    return stream


def fail_after(text: str, message: str) -> Entry:
    async def stream(request: ModelRequest) -> AsyncIterator[StreamChunk]:
        yield BlockStart(0, "text")
        yield TextDelta(0, text)
        raise ProviderError(message, 503)

    return stream


def retried(report: RetryReport, then: Entry) -> Entry:
    """A model call whose first attempt failed: the provider reports its retry, then answers."""

    async def stream(request: ModelRequest) -> AsyncIterator[StreamChunk]:
        assert request.on_retry is not None
        await request.on_retry(report)
        async for chunk in then(request):
            yield chunk

    return stream


class Scripted:
    name = "scripted"

    def __init__(self, *entries: Entry) -> None:
        self.entries = list(entries)
        self.requests: list[ModelRequest] = []

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        self.requests.append(request)
        return self.entries.pop(0)(request)


class Client:
    def __init__(self, **capabilities: bool) -> None:
        self.capabilities = ClientCapabilities(**capabilities)
        self.updates: list[Any] = []
        self.started = anyio.Event()

    async def request(self, method: str, params: object) -> object:
        raise AssertionError(method)

    async def notify(self, method: str, params: object) -> None:
        assert method == "session/update"
        update = msgspec.to_builtins(params)["update"]
        self.updates.append(update)
        if update["sessionUpdate"] == "compaction_summary_chunk" or (
            update["sessionUpdate"] == "agent_message_chunk"
        ):
            self.started.set()


class Session:
    """One session's recorder, a provider and a client, and the turns run on them."""

    def __init__(self, tmp_path: Path, provider: Scripted, client: Client) -> None:
        self.tmp_path = tmp_path
        self.provider = provider
        self.client = client
        self.recorder: SessionRecorder | None = None
        self.compact_limit: int | None = None

    async def open(self) -> None:
        store = JsonlStore(self.tmp_path / "sessions")
        header = SessionHeader(
            version=SESSION_FORMAT_VERSION, id="s", created_at=0, cwd=str(self.tmp_path)
        )
        self.recorder = SessionRecorder(await store.create(header), EventLog(), clock=lambda: 0)

    def turn(self, text: str, compact: str | None = None) -> Turn:
        assert self.recorder is not None
        env = TurnEnv(
            self.recorder,
            self.provider,
            self.client,
            ToolContext("s", self.tmp_path, [], self.client),
            compact_limit=lambda: self.compact_limit,
            usage_update=lambda usage: usage_shown(usage),
        )
        return Turn(env, [TextContent(text)], compact=compact)

    def events(self) -> list[dict[str, Any]]:
        assert self.recorder is not None
        return [
            {"type": e["type"], "data": e["data"]}
            for e in (msgspec.json.decode(encode_event(ev)) for ev in self.recorder.log.events())
        ]


def usage_shown(usage: Usage) -> Any:
    from acp_server.core.usage import usage_shown as shown

    return shown(usage, 1000, None, [])


async def run(session: Session, text: str, compact: str | None = None) -> str:
    return await session.turn(text, compact).run()


def summary_updates(session_updates: list[Any]) -> list[Any]:
    return [u for u in session_updates if u["sessionUpdate"].startswith("compaction")]


async def test_a_compaction_is_shown_as_compaction_updates_to_a_client_that_takes_them(
    tmp_path: Path,
) -> None:
    client = Client(**COMPACTION)
    provider = Scripted(
        answer("Noted: port 8123.", used=(560, 6)),
        answer("The build runs on port 8123.", pieces=2),
        answer("Port 8123."),
    )
    session = Session(tmp_path, provider, client)
    await session.open()
    await run(session, "Remember: the build runs on port 8123.")
    session.compact_limit = 500
    client.updates.clear()

    assert await run(session, "Which port?") == "end_turn"

    assert client.updates == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "in_progress",
        },
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "compaction-1-0",
            "content": {"type": "text", "text": "The build runs"},
        },
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "compaction-1-0",
            "content": {"type": "text", "text": " on port 8123."},
        },
        {"sessionUpdate": "usage_update", "used": 12, "size": 1000},
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "completed",
            "summary": [{"type": "text", "text": "The build runs on port 8123."}],
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Port 8123."},
            "messageId": "assistant-1-1",
        },
        {"sessionUpdate": "usage_update", "used": 12, "size": 1000},
    ]


async def test_a_client_without_the_capability_sees_the_summary_as_an_agent_message(
    tmp_path: Path,
) -> None:
    client = Client()
    provider = Scripted(
        answer("Noted.", used=(560, 6)), answer("The summary."), answer("Port 8123.")
    )
    session = Session(tmp_path, provider, client)
    await session.open()
    await run(session, "Remember the port.")
    session.compact_limit = 500
    client.updates.clear()

    await run(session, "Which port?")

    assert [(u["sessionUpdate"], u.get("messageId")) for u in client.updates] == [
        ("agent_message_chunk", "assistant-1-0"),
        ("usage_update", None),
        ("agent_message_chunk", "assistant-1-1"),
        ("usage_update", None),
    ]


async def test_a_cancelled_automatic_compaction_leaves_no_partial_summary_in_the_history(
    tmp_path: Path,
) -> None:
    client = Client(**COMPACTION)
    provider = Scripted(answer("Noted.", used=(560, 6)), hang_after("Half a sum"))
    session = Session(tmp_path, provider, client)
    await session.open()
    await run(session, "Remember the port.")
    session.compact_limit = 500
    client.updates.clear()
    client.started = anyio.Event()
    turn = session.turn("Which port?")

    async with anyio.create_task_group() as tg:

        async def cancel_when_streaming() -> None:
            await client.started.wait()
            turn.cancel()

        tg.start_soon(cancel_when_streaming)
        assert await turn.run() == "cancelled"

    assert session.recorder is not None
    assert derive_messages(session.recorder.log.plain_events()) == [
        UserTurn([TextContent("Remember the port.")]),
        AssistantTurn([AssistantText("Noted.")]),
        UserTurn([TextContent("Which port?")]),
    ]
    assert [e["type"] for e in session.events()[11:]] == [
        "turn/start",
        "user/message",
        "step/start",
        "assistant/chunk",
        "assistant/chunk",
        "step/end",
        "turn/end",
    ]
    assert summary_updates(client.updates) == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "in_progress",
        },
        {
            "sessionUpdate": "compaction_summary_chunk",
            "compactionId": "compaction-1-0",
            "content": {"type": "text", "text": "Half a sum"},
        },
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "cancelled",
        },
    ]


async def test_a_failed_compaction_is_a_failed_compaction_update_and_an_error_notice(
    tmp_path: Path,
) -> None:
    client = Client(compaction=True, notices=True)
    provider = Scripted(answer("Noted.", used=(560, 6)), fail_after("Half", "overloaded"))
    session = Session(tmp_path, provider, client)
    await session.open()
    await run(session, "Remember the port.")
    session.compact_limit = 500
    client.updates.clear()

    with pytest.raises(ModelRequestFailed, match="overloaded"):
        await run(session, "Which port?")

    assert client.updates[-2:] == [
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "compaction-1-0",
            "status": "failed",
            "error": "overloaded",
        },
        {
            "sessionUpdate": "notice",
            "severity": "error",
            "title": "Compaction failed",
            "description": "overloaded",
        },
    ]
    assert session.events()[-2:] == [
        {
            "type": "session/notice",
            "data": {
                "severity": "error",
                "title": "Compaction failed",
                "description": "overloaded",
            },
        },
        {
            "type": "turn/end",
            "data": {
                "turn": 1,
                "reason": {"kind": "error", "error": {"message": "overloaded", "code": 503}},
            },
        },
    ]


RETRY = RetryReport(
    message="openai: HTTP 503 Service Unavailable from http://127.0.0.1:1/v1",
    status=503,
    attempt=2,
    attempts=4,
    delay=0.5,
)
RETRY_NOTICE = {
    "severity": "warning",
    "title": "Model request failed (503); retrying",
    "description": "openai: HTTP 503 Service Unavailable from http://127.0.0.1:1/v1. "
    "Attempt 2 of 4 in 0.5 s.",
}


async def test_a_provider_retry_is_a_notice_in_the_log_before_the_steps_chunks(
    tmp_path: Path,
) -> None:
    client = Client(notices=True)
    session = Session(tmp_path, Scripted(retried(RETRY, answer("Hi."))), client)
    await session.open()

    await run(session, "hello")

    assert client.updates[0] == {"sessionUpdate": "notice", **RETRY_NOTICE}
    assert [e["type"] for e in session.events()[:5]] == [
        "turn/start",
        "user/message",
        "step/start",
        "session/notice",
        "assistant/chunk",
    ]
    assert session.events()[3]["data"] == RETRY_NOTICE


async def test_a_client_without_notices_is_sent_none_but_the_log_keeps_them(
    tmp_path: Path,
) -> None:
    client = Client()
    session = Session(tmp_path, Scripted(retried(RETRY, answer("Hi."))), client)
    await session.open()

    await run(session, "hello")

    assert [u["sessionUpdate"] for u in client.updates] == ["agent_message_chunk", "usage_update"]
    assert session.events()[3] == {"type": "session/notice", "data": RETRY_NOTICE}


async def test_a_usage_crossing_into_the_top_of_the_context_window_is_one_notice(
    tmp_path: Path,
) -> None:
    client = Client(notices=True)
    provider = Scripted(
        answer("One.", used=(500, 5)),
        answer("Two.", used=(900, 5)),
        answer("Three.", used=(950, 5)),
    )
    session = Session(tmp_path, provider, client)
    await session.open()
    for text in ("one", "two", "three"):
        await run(session, text)

    notices = [u for u in client.updates if u["sessionUpdate"] == "notice"]
    assert notices == [
        {
            "sessionUpdate": "notice",
            "severity": "warning",
            "title": "Context window nearly full",
            "description": "The last model call used 905 of 1000 tokens (90%). "
            "/compact summarises the conversation to free it.",
        }
    ]
