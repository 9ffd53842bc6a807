"""The `permission/decision` event (SPEC 1.2): its shape in the log, what a load replays of it
(nothing: the request was shown as its tool call, the answer was the user's own), the provider
history (untouched), and how the tools report each answer to the turn that logs it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from acp_server.agent.ports import ClientCapabilities
from acp_server.agent.tools import ToolContext
from acp_server.agent.tools.base import ToolCallInfo, ToolError
from acp_server.agent.tools.permission import ensure_permission
from acp_server.core.chunk_rows import StorageRecord
from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    EventError,
    PermissionDecision,
    PermissionDecisionData,
    PermissionOutcome,
    SessionEvent,
    StepData,
    StepStart,
    ToolCall,
    ToolCallData,
    ToolResult,
    ToolResultData,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
    decode_event,
    encode_event,
)
from acp_server.core.messages import derive_messages
from acp_server.core.projection import project_load
from acp_server.core.stream import AssistantToolCall


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_selected_option_is_logged_with_its_id() -> None:
    event = PermissionDecision(7, 0, PermissionDecisionData(0, 1, "c1", "selected", "allow_once"))
    assert msgspec.json.decode(encode_event(event)) == {
        "type": "permission/decision",
        "seq": 7,
        "time": 0,
        "data": {
            "turn": 0,
            "step": 1,
            "callId": "c1",
            "outcome": "selected",
            "optionId": "allow_once",
        },
    }
    assert decode_event(encode_event(event)) == event


def test_a_cancelled_request_is_logged_without_an_option() -> None:
    raw = b'{"type":"permission/decision","seq":3,"time":5,"data":{"turn":0,"step":0,"callId":"c1","outcome":"cancelled"}}'
    assert decode_event(raw) == PermissionDecision(
        3, 5, PermissionDecisionData(0, 0, "c1", "cancelled")
    )


def test_an_outcome_outside_the_three_is_refused() -> None:
    raw = b'{"type":"permission/decision","seq":3,"time":5,"data":{"turn":0,"step":0,"callId":"c1","outcome":"ignored"}}'
    with pytest.raises(EventError, match="outcome"):
        decode_event(raw)


CALL = AssistantToolCall("c1", "write_file", '{"path":"a.txt","content":"x"}')
TURN: list[SessionEvent] = [
    TurnStart(0, 0, TurnStartData(0)),
    UserMessageEvent(1, 0, UserMessageData(0, UserMessage("user-0", [TextContent("write")]))),
    StepStart(2, 0, StepData(0, 0)),
    AssistantMessageEvent(
        3, 0, AssistantMessageData(0, 0, AssistantMessage("assistant-0-0", [CALL]))
    ),
    ToolCall(4, 0, ToolCallData(0, 0, "c1", CALL.name, CALL.arguments)),
]


def with_result(decisions: list[SessionEvent]) -> list[SessionEvent]:
    seq = len(TURN) + len(decisions)
    result = ToolResult(
        seq, 0, ToolResultData(0, 0, "c1", [TextContent("wrote a.txt")]), source_range=(4, 4)
    )
    return [*TURN, *decisions, result]


DECIDED = with_result(
    [PermissionDecision(5, 0, PermissionDecisionData(0, 0, "c1", "selected", "allow_once"))]
)
UNDECIDED = with_result([])


def test_a_load_replays_nothing_of_a_decision() -> None:
    decided: list[StorageRecord] = list(DECIDED)
    undecided: list[StorageRecord] = list(UNDECIDED)
    assert project_load(decided) == project_load(undecided)


def test_the_provider_history_is_the_same_with_a_decision() -> None:
    assert derive_messages(DECIDED) == derive_messages(UNDECIDED)


# -- the tools report each answer ------------------------------------------------------------


class Client:
    """A `ClientPort` answering every permission request with `answer` (None: never)."""

    capabilities = ClientCapabilities()

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked = anyio.Event()

    async def request(self, method: str, params: Any) -> Any:
        self.asked.set()
        if self.answer is None:
            await anyio.sleep_forever()
        return self.answer

    async def notify(self, method: str, params: Any) -> None:
        pass

    async def notify_all(self, method: str, params: Any) -> None:
        pass


Decision = tuple[str, PermissionOutcome, str | None]
INFO = ToolCallInfo("c1", "write_file", "{}", "Write a.txt", "edit")


def context(tmp_path: Path, client: Client, decisions: list[Decision]) -> ToolContext:
    return ToolContext(
        "s",
        tmp_path,
        [],
        client,
        on_permission=lambda *decision: decisions.append(decision),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("option", ["allow_once", "allow_always", "reject_once", "reject_always"])
async def test_each_selected_option_is_reported(tmp_path: Path, option: str) -> None:
    decisions: list[Decision] = []
    answer = {"outcome": {"outcome": "selected", "optionId": option}}
    ctx = context(tmp_path, Client(answer), decisions)
    with contextlib.suppress(ToolError):  # a rejection, an unknown option: the model's error
        await ensure_permission(ctx, INFO)
    assert decisions == [("c1", "selected", option)]


@pytest.mark.anyio
async def test_a_cancelled_answer_is_reported(tmp_path: Path) -> None:
    decisions: list[Decision] = []
    ctx = context(tmp_path, Client({"outcome": {"outcome": "cancelled"}}), decisions)
    with pytest.raises(ToolError, match="permission request cancelled"):
        await ensure_permission(ctx, INFO)
    assert decisions == [("c1", "cancelled", None)]


@pytest.mark.anyio
async def test_a_turn_cancelled_before_the_answer_reports_the_request_cancelled(
    tmp_path: Path,
) -> None:
    decisions: list[Decision] = []
    client = Client(None)
    ctx = context(tmp_path, client, decisions)
    async with anyio.create_task_group() as group:
        group.start_soon(ensure_permission, ctx, INFO)
        await client.asked.wait()
        group.cancel_scope.cancel()
    assert decisions == [("c1", "cancelled", None)]


@pytest.mark.anyio
async def test_a_malformed_answer_is_no_decision(tmp_path: Path) -> None:
    decisions: list[Decision] = []
    ctx = context(tmp_path, Client({"outcome": {"outcome": "selected"}}), decisions)
    with pytest.raises(ToolError, match="malformed"):
        await ensure_permission(ctx, INFO)
    assert decisions == []


@pytest.mark.anyio
async def test_a_decision_the_mode_makes_asks_nothing_and_reports_nothing(tmp_path: Path) -> None:
    decisions: list[Decision] = []
    client = Client(None)
    ctx = context(tmp_path, client, decisions)
    ctx.mode = lambda: "full-access"
    await ensure_permission(ctx, INFO)
    assert (decisions, client.asked.is_set()) == ([], False)
