"""A model request that fails, through the real server (SPEC 1.2, 4.1, 5).

The prompt is answered with JSON-RPC error -32012 whose `data` says what failed; the log ends
the turn `{kind: "error"}`, keeps the partial output as chunks only (no `assistant/message`), and
the session stays usable.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args, step_chunks
from prompt_harness import PromptServer, chunk_events, message_chunks, turn_opening

PARTIAL = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "Let me "},
    {"type": "text-delta", "index": 0, "text": "check"},
]


def exhausted(entry: int, calls: int) -> str:
    return (
        f"llm-replay: session <session> asked for script entry {entry}, but <tmp>/fixture/session.jsonl "
        f"holds only {calls} model calls (entries 0 to {calls - 1}): the script is exhausted"
    )


@pytest.mark.process
def test_a_stream_that_throws_answers_a_model_request_error_and_keeps_the_chunks(
    tmp_path: Path,
) -> None:
    throw = {"kind": "throw", "chunks": PARTIAL, "message": "rate limited", "code": 429}
    scenario = Scenario(
        [("check", [Step(text="Let me check that.")])],
        override={"patches": [{"at": 0, "entry": throw}]},
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        answered = server.prompt(session, "check")

        assert answered.error == {
            "code": -32012,
            "message": "Model request failed: rate limited",
            "data": {"message": "rate limited", "code": 429},
        }
        assert answered.updates == message_chunks(["Let me ", "check"], "assistant-0-0")
        assert server.log(session) == [
            *turn_opening(0, "check"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, PARTIAL),
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {
                "type": "turn/end",
                "data": {
                    "turn": 0,
                    "reason": {"kind": "error", "error": {"message": "rate limited", "code": 429}},
                },
            },
        ]

        # The session stays usable: the next prompt asks the model again (and the one-entry
        # script, now exhausted, says so).
        again = server.prompt(session, "again")
        message = exhausted(1, 1)
        assert server.normalize(again.error) == {
            "code": -32012,
            "message": f"Model request failed: {message}",
            "data": {"message": message},
        }
        assert again.updates == []
        assert server.log(session)[8:] == [
            *turn_opening(1, "again"),
            {"type": "step/start", "data": {"turn": 1, "step": 0}},
            {"type": "step/end", "data": {"turn": 1, "step": 0}},
            {
                "type": "turn/end",
                "data": {"turn": 1, "reason": {"kind": "error", "error": {"message": message}}},
            },
        ]


@pytest.mark.process
def test_a_throw_before_any_chunk_keeps_the_completed_steps_and_a_string_code(
    tmp_path: Path,
) -> None:
    plan = ToolUse(
        "call_plan", "todo_write", args(todos=[{"content": "look", "status": "in_progress"}])
    )
    throw = {"kind": "throw", "chunks": [], "message": "overloaded", "code": "overloaded_error"}
    scenario = Scenario(
        [("go", [Step(calls=[plan]), Step(text="unused")])],
        override={"patches": [{"at": 1, "entry": throw}]},
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        assert answered.error == {
            "code": -32012,
            "message": "Model request failed: overloaded",
            "data": {"message": "overloaded", "code": "overloaded_error"},
        }
        assert [(u["sessionUpdate"], u.get("status")) for u in answered.updates] == [
            ("tool_call", "pending"),
            ("tool_call_update", "in_progress"),
            ("tool_call_update", "completed"),
            ("plan", None),
        ]
        n = len(step_chunks(Step(calls=[plan])))
        assert server.log(session) == [
            *turn_opening(0, "go"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, step_chunks(Step(calls=[plan]))),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [
                            {
                                "type": "tool-call",
                                "id": "call_plan",
                                "name": "todo_write",
                                "arguments": plan.arguments,
                            }
                        ],
                    },
                },
                "sourceRange": [3, 2 + n],
            },
            {
                "type": "tool/call",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_plan",
                    "name": "todo_write",
                    "arguments": plan.arguments,
                },
            },
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_plan",
                    "content": [{"type": "text", "text": "Plan updated (1 item):\n[~] look"}],
                },
                "sourceRange": [4 + n, 4 + n],
            },
            {
                "type": "plan/update",
                "data": {
                    "entries": [{"content": "look", "priority": "medium", "status": "in_progress"}]
                },
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "step/start", "data": {"turn": 0, "step": 1}},
            {"type": "step/end", "data": {"turn": 0, "step": 1}},
            {
                "type": "turn/end",
                "data": {
                    "turn": 0,
                    "reason": {
                        "kind": "error",
                        "error": {"message": "overloaded", "code": "overloaded_error"},
                    },
                },
            },
        ]


@pytest.mark.process
def test_an_exhausted_script_fails_the_model_call_that_asks_for_more(tmp_path: Path) -> None:
    # The recording stops after the tool step: the model call that would follow it is missing.
    call = ToolUse(
        "call_plan", "todo_write", args(todos=[{"content": "look", "status": "pending"}])
    )
    tool_step = Step(calls=[call])
    with PromptServer(tmp_path, Scenario([("go", [tool_step])])) as server:
        session = server.new_session()
        answered = server.prompt(session, "go")

        message = exhausted(1, 1)
        assert server.normalize(answered.error) == {
            "code": -32012,
            "message": f"Model request failed: {message}",
            "data": {"message": message},
        }
        n = len(step_chunks(tool_step))
        assert server.log(session) == [
            *turn_opening(0, "go"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, step_chunks(tool_step)),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [
                            {
                                "type": "tool-call",
                                "id": "call_plan",
                                "name": "todo_write",
                                "arguments": call.arguments,
                            }
                        ],
                    },
                },
                "sourceRange": [3, 2 + n],
            },
            {
                "type": "tool/call",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_plan",
                    "name": "todo_write",
                    "arguments": call.arguments,
                },
            },
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_plan",
                    "content": [{"type": "text", "text": "Plan updated (1 item):\n[ ] look"}],
                },
                "sourceRange": [4 + n, 4 + n],
            },
            {
                "type": "plan/update",
                "data": {
                    "entries": [{"content": "look", "priority": "medium", "status": "pending"}]
                },
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "step/start", "data": {"turn": 0, "step": 1}},
            {"type": "step/end", "data": {"turn": 0, "step": 1}},
            {
                "type": "turn/end",
                "data": {"turn": 0, "reason": {"kind": "error", "error": {"message": message}}},
            },
        ]


@pytest.mark.anyio
async def test_a_provider_that_crashes_ends_the_turn_with_an_error_and_the_session_stays_usable(
    tmp_path: Path,
) -> None:
    """Not a ProviderError but a bug in the provider: the turn is still closed in the log."""
    from acp_server.agent.failures import ModelRequestFailed
    from acp_server.agent.loop import Turn
    from acp_server.agent.ports import ClientCapabilities
    from acp_server.agent.recorder import SessionRecorder
    from acp_server.agent.tools import ToolContext
    from acp_server.agent.turn_env import TurnEnv
    from acp_server.core.content import TextContent
    from acp_server.core.event_log import EventLog
    from acp_server.core.events import TurnEnd, TurnEndReasonError
    from acp_server.core.header import SessionHeader
    from acp_server.storage.jsonl.store import JsonlStore

    class Broken:
        name = "broken"

        def bind_session(self, session: object) -> None:
            pass

        async def stream(self, request: object):  # type: ignore[no-untyped-def]  # never yields: it raises
            raise KeyError("a bug")
            yield  # pragma: no cover

    class Client:
        capabilities = ClientCapabilities()

        async def request(self, method: str, params: object) -> object:
            raise AssertionError(method)

        async def notify(self, method: str, params: object) -> None:
            pass

    store = JsonlStore(tmp_path / "sessions")
    recorder = SessionRecorder(
        await store.create(SessionHeader(version=2, id="s", created_at=0, cwd=str(tmp_path))),
        EventLog(),
    )
    env = TurnEnv(recorder, Broken(), Client(), ToolContext("s", tmp_path, [], Client()))
    with pytest.raises(ModelRequestFailed, match="the model provider failed unexpectedly"):
        await Turn(env, [TextContent("hi")]).run()
    await recorder.close()
    last = recorder.log.events()[-1]
    assert type(last) is TurnEnd and type(last.data.reason) is TurnEndReasonError
