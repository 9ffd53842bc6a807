"""The client's `Follow` after `session.followEnded {reason: "rewound"}`: the server's log failed
to write and dropped events it had sent; the follow forgets them, follows again, and its journal
is the log's again (SPEC 3.2, 3.3)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio
import msgspec
import pytest
from anyio.streams.memory import MemoryObjectSendStream

from acp_server.client.follow import Follow
from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    SessionEvent,
    StepData,
    StepStart,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.history import to_history_records
from acp_server.core.stream import TextDelta

pytestmark = pytest.mark.anyio

HEADER = {"type": "session", "version": 2, "id": "s", "createdAt": 0, "cwd": "/w"}


def chunk(seq: int, text: str) -> AssistantChunk:
    return AssistantChunk(seq, 1000 + seq, AssistantChunkData(0, 0, TextDelta(0, text)))


OPENING: list[SessionEvent] = [
    TurnStart(0, 1000, TurnStartData(0)),
    UserMessageEvent(1, 1001, UserMessageData(0, UserMessage("u0", [TextContent("Hi")]))),
    StepStart(2, 1002, StepData(0, 0)),
    chunk(3, "stored"),
]
SHOWN_THEN_DROPPED = [chunk(4, "stored too"), chunk(5, "never stored")]
STORED_AFTER = [chunk(5, "instead"), chunk(6, "and more")]


def wire(events: list[SessionEvent]) -> list[Any]:
    return msgspec.json.decode(msgspec.json.encode(to_history_records(pack_chunk_runs(events))))


def live(event: SessionEvent) -> Any:
    return msgspec.json.decode(msgspec.json.encode(event))


class ScriptedServer:
    """A `FollowClient` whose `session.follow` results are scripted, one per subscription."""

    def __init__(self, snapshots: list[list[SessionEvent]]) -> None:
        self.snapshots = snapshots
        self.streams: dict[str, MemoryObjectSendStream[tuple[str, Any]]] = {}
        self.requests: list[tuple[str, Any]] = []

    async def request(
        self, method: str, params: Any = None, *, on_result: Callable[[Any], None] | None = None
    ) -> Any:
        self.requests.append((method, params))
        if method == "session.unfollow":
            return {}
        assert method == "session.follow"
        events = self.snapshots.pop(0)
        result = {
            "subscriptionId": f"sub-{len(self.streams)}",
            "header": HEADER,
            "cursor": events[-1].seq,
            "records": wire(events),
            "hasMore": False,
        }
        if on_result is not None:
            on_result(result)
        return result

    async def page(
        self,
        address: Mapping[str, str],
        through_seq: int,
        before_seq: int | None = None,
        max_messages: int = 50,
    ) -> Any:
        raise AssertionError("nothing here needs a page")

    def route_follow(
        self, subscription_id: str, send: MemoryObjectSendStream[tuple[str, Any]]
    ) -> None:
        self.streams[subscription_id] = send

    def unroute_follow(self, subscription_id: str | None) -> None:
        self.streams.pop(subscription_id or "", None)

    def send(self, subscription_id: str, method: str, params: Any) -> None:
        self.streams[subscription_id].send_nowait((method, params))


async def test_a_rewound_follow_drops_what_was_never_stored_and_follows_the_log_again() -> None:
    server = ScriptedServer([OPENING, [*OPENING, SHOWN_THEN_DROPPED[0], *STORED_AFTER]])
    yielded = []
    async with await Follow.start(server, {"kind": "session", "sessionId": "s"}, 50) as follow:
        for event in SHOWN_THEN_DROPPED:
            server.send("sub-0", "session.event", {"subscriptionId": "sub-0", "event": live(event)})
        server.send(
            "sub-0",
            "session.followEnded",
            {"subscriptionId": "sub-0", "reason": "rewound", "lastSeq": 4},
        )
        with anyio.fail_after(5):
            async for event in follow:
                yielded.append(event)
                if len(yielded) == 4:
                    break
        subscription = follow.subscription_id
    assert yielded == [*SHOWN_THEN_DROPPED, *STORED_AFTER]
    assert list(follow.journal.events) == [*OPENING, SHOWN_THEN_DROPPED[0], *STORED_AFTER]
    assert (follow.rewinds, follow.overflows, subscription) == ([4], [], "sub-1")
    assert [method for method, _ in server.requests] == [
        "session.follow",
        "session.follow",
        "session.unfollow",
    ]
