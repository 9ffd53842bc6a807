"""Plans in the unstable schema's shapes (`plan_update`, `plan_removed`) for a client that
advertised `clientCapabilities.plan`, and the legacy `plan` for every other client (SPEC 4.7).

The log keeps one form, `plan/update`; the session's one plan (`todo_write`'s) has the id
`todo`. Frames are held to the schema of the TypeScript SDK 2.4.0 (`sdk_schema`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from prompt_harness import PromptServer
from sdk_schema import check
from test_projection import Log, shown, text, user_chunk

from acp_server.agent.tools import BUILTIN_TOOLS
from acp_server.core.acp_updates import SessionNotification, SessionUpdate, plan_shown
from acp_server.core.content import TextContent
from acp_server.core.events import PlanEntry
from acp_server.core.projection import project_load
from acp_server.core.stream import AssistantToolCall, Finish

READ = PlanEntry("Read", "high", "completed")
WRITE = PlanEntry("Write", "low", "pending")
ENTRIES = [
    {"content": "Read", "priority": "high", "status": "completed"},
    {"content": "Write", "priority": "low", "status": "pending"},
]


def wire(update: SessionUpdate) -> dict[str, Any]:
    """The update as the client receives it, held to the SDK's `SessionNotification`."""
    params = msgspec.to_builtins(SessionNotification("sess-1", update))
    check("SessionNotification", params)
    update_value: dict[str, Any] = params["update"]
    return update_value


def test_a_plan_goes_to_a_client_without_the_capability_as_the_legacy_plan_byte_for_byte() -> None:
    update = SessionNotification("sess-1", plan_shown([READ], operations=False))

    assert msgspec.json.encode(update) == (
        b'{"sessionId":"sess-1","update":{"sessionUpdate":"plan","entries":'
        b'[{"content":"Read","priority":"high","status":"completed"}]}}'
    )


def test_a_plan_goes_to_a_client_with_the_capability_as_plan_update_of_the_todo_plan() -> None:
    assert wire(plan_shown([READ, WRITE], operations=True)) == {
        "sessionUpdate": "plan_update",
        "plan": {"type": "items", "planId": "todo", "entries": ENTRIES},
    }


def test_an_emptied_plan_goes_to_a_client_with_the_capability_as_plan_removed() -> None:
    assert wire(plan_shown([], operations=True)) == {
        "sessionUpdate": "plan_removed",
        "planId": "todo",
    }


def test_an_emptied_plan_goes_to_a_client_without_the_capability_as_an_empty_plan() -> None:
    assert wire(plan_shown([], operations=False)) == {"sessionUpdate": "plan", "entries": []}


def planned_log() -> Log:
    return (
        Log()
        .user(TextContent("plan it"))
        .chunks(Finish("tool-calls"))
        .message(AssistantToolCall("c1", "todo_write", '{"todos": []}'))
        .plan(READ, WRITE)
        .tool("c1", "todo_write", '{"todos": []}', TextContent("plan updated"))
        .plan()
        .step_end()
    )


def test_a_load_shows_each_plan_update_in_its_place_as_plan_operations() -> None:
    updates = project_load(planned_log().events, BUILTIN_TOOLS.present, plan_operations=True)

    assert [wire(u) for u in updates] == [
        user_chunk("plan it", "u0"),
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Update the plan",
            "kind": "think",
            "status": "pending",
            "rawInput": {"todos": []},
            "name": "todo_write",
        },
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "completed",
            "content": [{"type": "content", "content": text("plan updated")}],
            "name": "todo_write",
        },
        {
            "sessionUpdate": "plan_update",
            "plan": {"type": "items", "planId": "todo", "entries": ENTRIES},
        },
        {"sessionUpdate": "plan_removed", "planId": "todo"},
    ]


def test_a_load_without_the_capability_shows_the_same_plans_as_legacy_plans() -> None:
    updates = project_load(planned_log().events, BUILTIN_TOOLS.present)

    assert shown(updates)[3:] == [
        {"sessionUpdate": "plan", "entries": ENTRIES},
        {"sessionUpdate": "plan", "entries": []},
    ]


TODO = ToolUse(
    "call_todo",
    "todo_write",
    args(todos=[{"content": "Read", "status": "completed", "priority": "high"}]),
)
PLAN_UPDATE = {
    "sessionUpdate": "plan_update",
    "plan": {"type": "items", "planId": "todo", "entries": [ENTRIES[0]]},
}


@pytest.mark.process
def test_todo_write_sends_plan_update_live_and_a_load_replays_it_in_its_place(
    tmp_path: Path,
) -> None:
    scenario = Scenario([("go", [Step(calls=[TODO]), Step(text="Done.")])])
    with PromptServer(tmp_path, scenario, capabilities={"plan": {}}) as server:
        session = server.new_session()
        live = server.prompt(session, "go")
        loaded = server.request(
            "session/load", {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []}
        )

        assert [u["sessionUpdate"] for u in live.updates[:4]] == [
            "tool_call",
            "tool_call_update",
            "tool_call_update",
            "plan_update",
        ]
        assert live.updates[3] == PLAN_UPDATE
        replayed = [u for u in loaded.updates if u["sessionUpdate"].startswith("plan")]
        assert replayed == [PLAN_UPDATE]
        kinds = [u["sessionUpdate"] for u in loaded.updates]
        assert kinds.index("plan_update") == kinds.index("tool_call_update") + 1
        assert [e["type"] for e in server.log(session)].count("plan/update") == 1
        plan_event = next(e for e in server.log(session) if e["type"] == "plan/update")
        assert plan_event == {"type": "plan/update", "data": {"entries": [ENTRIES[0]]}}
