"""The `task` tool: a one-shot subagent in a child session, through the real server (SPEC 4.3, 5).

The child replays `session.1.jsonl` beside the fixture. It runs unseen (only the parent's `task`
call shows on the wire), writes its own log with header `origin: "subagent"` and
`parentSession`, and its final text is the `task` call's result.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args, step_chunks
from prompt_harness import (
    PERMISSION_OPTIONS,
    Answered,
    FakeClient,
    PromptServer,
    checkpoints,
    chunk_events,
    decision,
    message_chunks,
    text_result,
    turn_opening,
)

from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

TASK = ToolUse("call_task", "task", args(prompt="Count the files"))
TASK_STEP = Step(calls=[TASK])
TASK_ANNOUNCED = {
    "sessionUpdate": "tool_call",
    "toolCallId": "call_task",
    "title": "Subagent: Count the files",
    "kind": "other",
    "status": "pending",
    "rawInput": {"prompt": "Count the files"},
    "name": "task",
}
CHILD_ANSWER = Step(text="There are 2 files.")
CHILD_WRITE = ToolUse("call_child_write", "write_file", args(path="count.txt", content="2"))


def child_of(server: PromptServer, parent: str) -> str:
    """The id of the one other session in the sessions directory, now known as `<child>`."""
    (child,) = [p.name for p in server.sessions_dir.iterdir() if p.name != parent]
    server.session_ids[child] = "<child>"
    return child


def parent_log_head(call_seq: int) -> list[dict[str, Any]]:
    n = len(step_chunks(TASK_STEP))
    assert call_seq == 4 + n
    return [
        *turn_opening(0, "delegate"),
        {"type": "step/start", "data": {"turn": 0, "step": 0}},
        *chunk_events(0, 0, step_chunks(TASK_STEP)),
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
                            "id": "call_task",
                            "name": "task",
                            "arguments": TASK.arguments,
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
                "callId": "call_task",
                "name": "task",
                "arguments": TASK.arguments,
            },
        },
        {
            "type": "subagent/start",
            "data": {
                "turn": 0,
                "step": 0,
                "callId": "call_task",
                "childSessionId": "<child>",
                "mode": "one-shot",
            },
        },
    ]


def test_a_task_call_runs_a_subagent_whose_final_text_is_the_result(tmp_path: Path) -> None:
    final = Step(text="Two files.")
    scenario = Scenario(
        [("delegate", [TASK_STEP, final])], children=[[("Count the files", [CHILD_ANSWER])]]
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        answered = server.prompt(session, "delegate")
        child = child_of(server, session)

        assert answered.stop_reason == "end_turn"
        raw_output = {"childSessionId": "<child>", "stopReason": "end_turn"}
        assert answered.updates == [
            TASK_ANNOUNCED,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_task",
                "status": "in_progress",
                "name": "task",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_task",
                "status": "completed",
                "content": text_result("There are 2 files."),
                "rawOutput": raw_output,
                "name": "task",
            },
            *message_chunks(["Two", " ", "file", "s."], "assistant-0-1"),
        ]
        call_seq = 4 + len(step_chunks(TASK_STEP))
        second = call_seq + 5
        assert server.log(session) == [
            *parent_log_head(call_seq),
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_task",
                    "content": [{"type": "text", "text": "There are 2 files."}],
                    "rawOutput": raw_output,
                },
                "sourceRange": [call_seq, call_seq],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "step/start", "data": {"turn": 0, "step": 1}},
            *chunk_events(0, 1, step_chunks(final)),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 1,
                    "message": {
                        "id": "assistant-0-1",
                        "content": [{"type": "text", "text": "Two files."}],
                    },
                },
                "sourceRange": [second, second + len(step_chunks(final)) - 1],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 1}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "completed"}}},
        ]

        header = read_log(server.log_path(child)).header
        assert (header.origin, header.parent_session, header.cwd) == (
            "subagent",
            session,
            str(server.workspace),
        )
        assert server.log(child) == [
            *turn_opening(0, "Count the files"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, step_chunks(CHILD_ANSWER)),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [{"type": "text", "text": "There are 2 files."}],
                    },
                },
                "sourceRange": [3, 2 + len(step_chunks(CHILD_ANSWER))],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "completed"}}},
        ]


def child_permission() -> dict[str, Any]:
    return {
        "method": "session/request_permission",
        "params": {
            "sessionId": "<session>",
            "toolCall": {
                "toolCallId": "call_child_write",
                "title": "Write count.txt",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"path": "count.txt", "content": "2"},
            },
            "options": PERMISSION_OPTIONS,
        },
    }


def test_a_subagent_asks_permission_under_the_parent_session_and_runs_unseen(
    tmp_path: Path,
) -> None:
    child_steps = [Step(calls=[CHILD_WRITE]), Step(text="Wrote it.")]
    scenario = Scenario(
        [("delegate", [TASK_STEP, Step(text="Done.")])],
        children=[[("Count the files", child_steps)]],
    )
    with PromptServer(tmp_path, scenario, client=FakeClient(permissions=["allow_once"])) as server:
        session = server.new_session()
        answered = server.prompt(session, "delegate")
        child = child_of(server, session)

        assert answered.stop_reason == "end_turn"
        assert answered.requests == [child_permission()]
        assert (server.workspace / "count.txt").read_text() == "2"
        assert answered.updates == [
            TASK_ANNOUNCED,
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_task",
                "status": "in_progress",
                "name": "task",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_task",
                "status": "completed",
                "content": text_result("Wrote it."),
                "rawOutput": {"childSessionId": "<child>", "stopReason": "end_turn"},
                "name": "task",
            },
            *message_chunks(["Don", "e", "."], "assistant-0-1"),
        ]
        child_results = [e for e in server.log(child) if e["type"] == "tool/result"]
        assert child_results == [
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_child_write",
                    "content": [
                        {"type": "text", "text": "Created <cwd>/count.txt (1 bytes)."},
                        {
                            "type": "diff",
                            "path": "<cwd>/count.txt",
                            "newText": "2",
                            "oldText": None,
                        },
                    ],
                    "rawOutput": {"path": "<cwd>/count.txt", "created": True, "bytes": 1},
                    "locations": [{"path": "<cwd>/count.txt"}],
                    **checkpoints("<cwd>/count.txt", None, "2"),
                },
                "sourceRange": [
                    4 + len(step_chunks(Step(calls=[CHILD_WRITE]))),
                    4 + len(step_chunks(Step(calls=[CHILD_WRITE]))),
                ],
            }
        ]


def test_cancel_during_a_subagents_permission_request_cancels_both_turns(tmp_path: Path) -> None:
    child_steps = [Step(calls=[CHILD_WRITE]), Step(text="Wrote it.")]
    scenario = Scenario(
        [("delegate", [TASK_STEP]), ("again", [Step(text="Back.")])],
        children=[[("Count the files", child_steps)]],
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "delegate"))
        while True:
            frame = server.process.read_frame()
            if frame.get("method") == "session/request_permission":
                break
        child = child_of(server, session)
        server.cancel(session)
        answered = server.read_until_response(prompt, answer=False)

        assert answered.stop_reason == "cancelled"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_task",
                "status": "failed",
                "content": text_result("cancelled"),
                "name": "task",
            }
        ]
        assert answered.requests == [
            {"method": "$/cancel_request", "params": {"requestId": frame["id"]}}
        ]
        call_seq = 4 + len(step_chunks(TASK_STEP))
        assert server.log(session)[call_seq + 2 :] == [
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_task",
                    "content": [{"type": "text", "text": "cancelled"}],
                    "isError": True,
                },
                "sourceRange": [call_seq, call_seq],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        child_call_seq = 4 + len(step_chunks(Step(calls=[CHILD_WRITE])))
        assert server.log(child)[child_call_seq:] == [
            {
                "type": "tool/call",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_child_write",
                    "name": "write_file",
                    "arguments": CHILD_WRITE.arguments,
                },
            },
            decision("call_child_write", "cancelled"),  # in the child's log: its request
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_child_write",
                    "content": [{"type": "text", "text": "cancelled"}],
                    "isError": True,
                },
                "sourceRange": [child_call_seq, child_call_seq],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        again = server.prompt(session, "again")
        assert again.stop_reason == "end_turn"
        assert again.text() == "Back."


CHILD_REFUSED_MESSAGE = (
    "Invalid params: session <child> is a subagent's child: it is read through its parent, "
    'with the history address {"kind": "subagent", "parentSessionId", "childSessionId"} '
    "- at `$.sessionId`"
)
CHILD_REFUSED = {
    "code": -32602,
    "message": CHILD_REFUSED_MESSAGE,
    "data": {"path": "$.sessionId", "check": "origin"},
}


def child_asking_permission(server: PromptServer) -> tuple[str, int, dict[str, Any]]:
    """A parent turn whose running child waits on its permission request: the parent's id,
    its prompt's request id and the child's request (unanswered)."""
    session = server.new_session()
    prompt = server.send_request("session/prompt", server.prompt_params(session, "delegate"))
    while True:
        frame = server.process.read_frame()
        if frame.get("method") == "session/request_permission":
            return session, prompt, frame


def wrote_it_scenario() -> Scenario:
    child_steps = [Step(calls=[CHILD_WRITE]), Step(text="Wrote it.")]
    return Scenario(
        [("delegate", [TASK_STEP, Step(text="Done.")])],
        children=[[("Count the files", child_steps)]],
    )


def test_session_close_of_a_running_child_is_refused_and_the_child_goes_on(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, wrote_it_scenario()) as server:
        session, prompt, asked = child_asking_permission(server)
        child = child_of(server, session)

        closed = server.request("session/close", {"sessionId": child})
        server.reply(asked["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
        answered = server.read_until_response(prompt)

        assert server.normalize(closed.error) == CHILD_REFUSED
        assert answered.stop_reason == "end_turn"
        assert answered.text() == "Done."
        assert server.log(child)[-1] == {
            "type": "turn/end",
            "data": {"turn": 0, "reason": {"kind": "completed"}},
        }


def test_session_close_of_a_finished_child_is_refused(tmp_path: Path) -> None:
    scenario = Scenario(
        [("delegate", [TASK_STEP, Step(text="Done.")])],
        children=[[("Count the files", [CHILD_ANSWER])]],
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        server.prompt(session, "delegate")
        child = child_of(server, session)

        closed = server.request("session/close", {"sessionId": child})

        assert server.normalize(closed.error) == CHILD_REFUSED


def test_session_cancel_of_a_running_child_is_ignored_with_a_log_line(tmp_path: Path) -> None:
    with PromptServer(tmp_path, wrote_it_scenario()) as server:
        session, prompt, asked = child_asking_permission(server)
        child = child_of(server, session)

        server.cancel(child)  # handled before the next line is read
        server.reply(asked["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
        answered = server.read_until_response(prompt)

        assert answered.stop_reason == "end_turn"
        assert answered.text() == "Done."
        assert server.log(child)[-1] == {
            "type": "turn/end",
            "data": {"turn": 0, "reason": {"kind": "completed"}},
        }
    refused = server.normalize(
        [line.split(": ", 1)[1] for line in server.process.stderr.splitlines()]
    )
    assert refused == ["notification session/cancel failed: " + CHILD_REFUSED_MESSAGE]


# ---------------------------------------------------------------------------------------------
# A client that advertised `subagents` (SPEC 4.7): the child as an ACP subagent session.

SUBAGENTS = {"subagents": {}}


def session_updates(answered: Answered) -> list[tuple[str, dict[str, Any]]]:
    """(session id, update) of every `session/update` before the response, normalized."""
    return [
        (answered.normalize(f["params"]["sessionId"]), answered.normalize(f["params"]["update"]))
        for f in answered.frames
        if f.get("method") == "session/update"
    ]


def on(session: str, updates: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(session, u) for u in updates]


RUNNING = {
    "sessionUpdate": "subagent_update",
    "sessionId": "<child>",
    "state": {"state": "running"},
}
PROMPT_SENT = {
    "sessionUpdate": "session_message",
    "messageId": "subagent-<child>-prompt",
    "senderSessionId": "<session>",
    "recipientSessionId": "<child>",
    "recipientMessageId": "user-0",
    "content": [{"type": "text", "text": "Count the files"}],
}
PROMPT_RECEIVED = {
    "sessionUpdate": "session_message",
    "messageId": "user-0",
    "senderSessionId": "<session>",
    "recipientSessionId": "<child>",
    "senderMessageId": "subagent-<child>-prompt",
    "content": [{"type": "text", "text": "Count the files"}],
}


def answer_received(text: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "session_message",
        "messageId": "subagent-<child>-answer",
        "senderSessionId": "<child>",
        "recipientSessionId": "<session>",
        "content": [{"type": "text", "text": text}],
    }


def idle(**state: Any) -> dict[str, Any]:
    return {
        "sessionUpdate": "subagent_update",
        "sessionId": "<child>",
        "state": {"state": "idle", **state},
    }


def live_texts(step: Step) -> list[str]:
    return [c["text"] for c in step_chunks(step) if c["type"] == "text-delta"]


IN_PROGRESS = {
    "sessionUpdate": "tool_call_update",
    "toolCallId": "call_task",
    "name": "task",
    "status": "in_progress",
}


def test_a_client_with_subagents_sees_the_child_run_as_its_own_session_live_and_on_load(
    tmp_path: Path,
) -> None:
    final = Step(text="Two files.")
    scenario = Scenario(
        [("delegate", [TASK_STEP, final])], children=[[("Count the files", [CHILD_ANSWER])]]
    )
    with PromptServer(tmp_path, scenario, capabilities=SUBAGENTS) as server:
        session = server.new_session()
        answered = server.prompt(session, "delegate")
        child_of(server, session)
        loaded = server.request(
            "session/load", {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []}
        )

        completed = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_task",
            "name": "task",
            "status": "completed",
            "content": text_result("There are 2 files."),
            "rawOutput": {"childSessionId": "<child>", "stopReason": "end_turn"},
        }
        answer = answer_received("There are 2 files.")
        assert session_updates(answered) == [
            *on("<session>", [TASK_ANNOUNCED, RUNNING, PROMPT_SENT]),
            ("<child>", PROMPT_RECEIVED),
            ("<session>", IN_PROGRESS),
            *on("<child>", message_chunks(live_texts(CHILD_ANSWER), "assistant-0-0")),
            *on("<session>", [answer, idle(stopReason="end_turn"), completed]),
            *on("<session>", message_chunks(live_texts(final), "assistant-0-1")),
        ]
        assert session_updates(loaded)[1:] == [
            *on("<session>", [TASK_ANNOUNCED, RUNNING, PROMPT_SENT]),
            ("<child>", PROMPT_RECEIVED),
            *on("<child>", message_chunks(["There are 2 files."], "assistant-0-0")),
            *on("<session>", [answer, idle(stopReason="end_turn"), completed]),
            *on("<session>", message_chunks(["Two files."], "assistant-0-1")),
        ]
        assert [e["type"] for e in server.log(session)].count("subagent/start") == 1


def test_a_shown_child_asks_permission_under_its_own_session_id(tmp_path: Path) -> None:
    client = FakeClient(permissions=["allow_once"])
    with PromptServer(
        tmp_path, wrote_it_scenario(), capabilities=SUBAGENTS, client=client
    ) as server:
        session = server.new_session()
        answered = server.prompt(session, "delegate")
        child_of(server, session)

        asked = child_permission()
        asked["params"]["sessionId"] = "<child>"
        assert answered.requests == [asked]
        assert (server.workspace / "count.txt").read_text() == "2"
        assert ("<session>", idle(stopReason="end_turn")) in session_updates(answered)


def test_a_cancelled_child_goes_idle_cancelled_before_its_call_fails(tmp_path: Path) -> None:
    with PromptServer(tmp_path, wrote_it_scenario(), capabilities=SUBAGENTS) as server:
        session, prompt, _asked = child_asking_permission(server)
        child_of(server, session)
        server.cancel(session)
        answered = server.read_until_response(prompt, answer=False)

        assert answered.stop_reason == "cancelled"
        assert session_updates(answered) == [
            (
                "<child>",
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call_child_write",
                    "name": "write_file",
                    "status": "failed",
                    "content": text_result("cancelled"),
                },
            ),
            ("<session>", idle(stopReason="cancelled")),
            (
                "<session>",
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": "call_task",
                    "name": "task",
                    "status": "failed",
                    "content": text_result("cancelled"),
                },
            ),
        ]


def test_a_load_whose_child_log_is_gone_still_shows_the_child_on_the_parent(
    tmp_path: Path,
) -> None:
    scenario = Scenario(
        [("delegate", [TASK_STEP, Step(text="Two files.")])],
        children=[[("Count the files", [CHILD_ANSWER])]],
    )
    with PromptServer(tmp_path, scenario, capabilities=SUBAGENTS) as server:
        session = server.new_session()
        server.prompt(session, "delegate")
        child = child_of(server, session)
        shutil.rmtree(server.sessions_dir / child)
        loaded = server.request(
            "session/load", {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []}
        )

        assert [u for s, u in session_updates(loaded) if s == "<child>"] == []
        assert [u for s, u in session_updates(loaded)][2:7] == [
            RUNNING,
            PROMPT_SENT,
            answer_received("There are 2 files."),
            idle(stopReason="end_turn"),
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_task",
                "name": "task",
                "status": "completed",
                "content": text_result("There are 2 files."),
                "rawOutput": {"childSessionId": "<child>", "stopReason": "end_turn"},
            },
        ]


def test_a_load_does_not_announce_a_child_whose_log_names_another_parent(tmp_path: Path) -> None:
    scenario = Scenario(
        [("delegate", [TASK_STEP, Step(text="Two files.")])],
        children=[[("Count the files", [CHILD_ANSWER])]],
    )
    with PromptServer(tmp_path, scenario, capabilities=SUBAGENTS) as server:
        session = server.new_session()
        server.prompt(session, "delegate")
        child = child_of(server, session)
        path = server.log_path(child)
        header, rest = path.read_bytes().split(b"\n", 1)
        value = json.loads(header)
        value["parentSession"] = "another-session"
        path.write_bytes(json.dumps(value).encode() + b"\n" + rest)
        loaded = server.request(
            "session/load", {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []}
        )

        assert [u["sessionUpdate"] for u in loaded.updates] == [
            "user_message_chunk",
            "tool_call",
            "tool_call_update",
            "agent_message_chunk",
        ]
