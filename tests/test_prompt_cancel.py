"""`session/cancel` during a prompt turn, through the real server (SPEC 1.2, 4.1, 5).

Whatever the turn is waiting for (a streaming model, a model that hangs, the user's answer to a
permission request), cancelling answers the prompt `cancelled`, never an error; the log keeps
what was received (`assistant/message` with `interrupted: true`), closes pending tool calls with
an error result "cancelled" and ends the turn `{kind: "cancelled"}`; and the session takes the
next prompt as usual.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args, fragments, step_chunks
from polling import TIMEOUT, wait_until
from prompt_harness import (
    PERMISSION_OPTIONS,
    PromptServer,
    chunk_events,
    decision,
    message_chunks,
    text_result,
    turn_opening,
)

pytestmark = pytest.mark.process

LONG = "".join(f"Paragraph {n} goes on and on. " for n in range(20))
AGAIN = Step(text="Back.")


def assert_next_prompt_works(server: PromptServer, session: str, turn: int) -> None:
    """The session is usable after the cancelled turn: the next scripted answer comes."""
    answered = server.prompt(session, "again")
    assert answered.stop_reason == "end_turn"
    assert answered.updates == message_chunks(["Bac", "k", "."], f"assistant-{turn}-0")
    events = server.log(session)
    assert events[-1] == {
        "type": "turn/end",
        "data": {"turn": turn, "reason": {"kind": "completed"}},
    }


def wait_for_file(path: Path, timeout: float = TIMEOUT) -> None:
    wait_until(path.exists, f"{path} appeared", timeout)


def test_cancel_during_a_stream_keeps_the_text_received(tmp_path: Path) -> None:
    scenario = Scenario([("long", [Step(text=LONG)]), ("again", [AGAIN])])
    with PromptServer(tmp_path, scenario, "--pace-ms", "20") as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "long"))
        seen = [server.read_update() for _ in range(3)]
        server.cancel(session)
        answered = server.read_until_response(prompt)

        assert answered.stop_reason == "cancelled"
        updates = seen + answered.updates
        shown = len(updates)
        assert 3 <= shown < len(fragments(LONG)) // 2
        received = fragments(LONG)[:shown]
        assert updates == message_chunks(received, "assistant-0-0")
        assert server.log(session) == [
            *turn_opening(0, "long"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, step_chunks(Step(text=LONG))[: 1 + shown]),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [{"type": "text", "text": "".join(received)}],
                    },
                    "interrupted": True,
                },
                "sourceRange": [3, 3 + shown],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        assert_next_prompt_works(server, session, 1)


HANG_PREFIX = [
    {"type": "block-start", "index": 0, "blockType": "reasoning"},
    {"type": "reasoning-delta", "index": 0, "text": "Let me "},
    {"type": "reasoning-delta", "index": 0, "text": "think"},
    {"type": "block-start", "index": 1, "blockType": "text"},
    {"type": "text-delta", "index": 1, "text": "Working"},
]


def hanging_scenario() -> Scenario:
    return Scenario(
        [("wait", [Step(text="never streamed")]), ("again", [AGAIN])],
        override={
            "patches": [
                {
                    "at": 0,
                    "entry": {"kind": "hang", "chunks": HANG_PREFIX, "readyFile": "ready.txt"},
                }
            ]
        },
    )


def test_cancel_while_the_model_hangs_ends_the_turn_cancelled(tmp_path: Path) -> None:
    with PromptServer(tmp_path, hanging_scenario()) as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "wait"))
        wait_for_file(server.workspace / "ready.txt")
        server.cancel(session)
        answered = server.read_until_response(prompt)

        assert answered.stop_reason == "cancelled"
        assert answered.updates == [
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "Let me "},
                "messageId": "assistant-0-0",
            },
            {
                "sessionUpdate": "agent_thought_chunk",
                "content": {"type": "text", "text": "think"},
                "messageId": "assistant-0-0",
            },
            {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": "Working"},
                "messageId": "assistant-0-0",
            },
        ]
        assert server.log(session) == [
            *turn_opening(0, "wait"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, HANG_PREFIX),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [
                            {"type": "reasoning", "text": "Let me think"},
                            {"type": "text", "text": "Working"},
                        ],
                    },
                    "interrupted": True,
                },
                "sourceRange": [3, 7],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        assert_next_prompt_works(server, session, 1)


def test_cancel_leaves_an_incomplete_tool_call_out_of_the_interrupted_message(
    tmp_path: Path,
) -> None:
    prefix = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Reading."},
        {"type": "block-end", "index": 0},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": "call_half",
            "argumentsDelta": '{"pa',
            "name": "read_file",
        },
    ]
    scenario = Scenario(
        [("wait", [Step(text="never streamed")]), ("again", [AGAIN])],
        override={
            "patches": [
                {"at": 0, "entry": {"kind": "hang", "chunks": prefix, "readyFile": "ready.txt"}}
            ]
        },
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "wait"))
        wait_for_file(server.workspace / "ready.txt")
        server.cancel(session)
        answered = server.read_until_response(prompt)

        assert answered.stop_reason == "cancelled"
        assert answered.updates == message_chunks(["Reading."], "assistant-0-0")
        assert server.log(session) == [
            *turn_opening(0, "wait"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, prefix),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [{"type": "text", "text": "Reading."}],
                    },
                    "interrupted": True,
                },
                "sourceRange": [3, 7],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        assert_next_prompt_works(server, session, 1)


def test_cancel_before_anything_arrived_logs_an_empty_interrupted_message(tmp_path: Path) -> None:
    scenario = Scenario(
        [("wait", [Step(text="never streamed")]), ("again", [AGAIN])],
        override={"patches": [{"at": 0, "entry": {"kind": "hang", "readyFile": "ready.txt"}}]},
    )
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "wait"))
        wait_for_file(server.workspace / "ready.txt")
        server.cancel(session)
        answered = server.read_until_response(prompt)

        assert answered.stop_reason == "cancelled"
        assert answered.updates == []
        assert server.log(session) == [
            *turn_opening(0, "wait"),
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {"id": "assistant-0-0", "content": []},
                    "interrupted": True,
                },
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        # The empty message is left out of the next request's history, which providers accept.
        assert_next_prompt_works(server, session, 1)


def test_a_cancel_answers_the_running_prompt_and_the_one_queued_behind_it_cancelled(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, hanging_scenario()) as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "wait"))
        wait_for_file(server.workspace / "ready.txt")
        second = server.send_request("session/prompt", server.prompt_params(session, "me too"))
        server.cancel(session)
        queued = server.read_until_response(second)
        running = server.read_until_response(prompt)

        assert (queued.stop_reason, running.stop_reason) == ("cancelled", "cancelled")
        assert [e for e in server.log(session) if e["type"] == "user/message"] == [
            turn_opening(0, "wait")[1]
        ]


def test_a_cancel_read_with_its_prompt_cancels_that_prompts_turn(tmp_path: Path) -> None:
    # Both lines in one write: the server reads them together, and the cancel, sent after the
    # prompt, must still find the prompt's turn (it begins cancelled).
    scenario = Scenario([("wait", [Step(text="never streamed")])])
    with PromptServer(tmp_path, scenario) as server:
        session = server.new_session()
        prompt = {
            "jsonrpc": "2.0",
            "id": "prompt",
            "method": "session/prompt",
            "params": server.prompt_params(session, "wait"),
        }
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}
        server.methods["prompt"] = "session/prompt"
        server.process.send_raw(b"".join(json.dumps(m).encode() + b"\n" for m in (prompt, cancel)))
        answered = server.read_until_response("prompt")

        assert answered.stop_reason == "cancelled"
        assert answered.updates == []
        assert server.log(session) == [
            *turn_opening(0, "wait"),
            # Cancelled before its model request went out: the step holds no message.
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]


# -- cancel while a permission request is pending ------------------------------------------------

WRITE = ToolUse("call_write", "write_file", args(path="notes.txt", content="x"))
WRITE_STEP = Step(calls=[WRITE])


def permission_scenario() -> Scenario:
    return Scenario([("write", [WRITE_STEP]), ("again", [AGAIN])])


def start_until_permission(
    server: PromptServer, session: str
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """Send the prompt and read up to the permission request (left unanswered)."""
    prompt = server.send_request("session/prompt", server.prompt_params(session, "write"))
    frames = []
    while True:
        frame = server.process.read_frame()
        if frame.get("method") == "session/request_permission":
            return prompt, frame, frames
        frames.append(frame)


def cancelled_write_log() -> list[dict[str, Any]]:
    n = len(step_chunks(WRITE_STEP))
    return [
        *turn_opening(0, "write"),
        {"type": "step/start", "data": {"turn": 0, "step": 0}},
        *chunk_events(0, 0, step_chunks(WRITE_STEP)),
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
                            "id": "call_write",
                            "name": "write_file",
                            "arguments": WRITE.arguments,
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
                "callId": "call_write",
                "name": "write_file",
                "arguments": WRITE.arguments,
            },
        },
        decision("call_write", "cancelled"),
        {
            "type": "tool/result",
            "data": {
                "turn": 0,
                "step": 0,
                "callId": "call_write",
                "content": [{"type": "text", "text": "cancelled"}],
                "isError": True,
            },
            "sourceRange": [4 + n, 4 + n],
        },
        {"type": "step/end", "data": {"turn": 0, "step": 0}},
        {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
    ]


WRITE_ANNOUNCED = {
    "sessionUpdate": "tool_call",
    "toolCallId": "call_write",
    "title": "Write notes.txt",
    "kind": "edit",
    "status": "pending",
    "rawInput": {"path": "notes.txt", "content": "x"},
    "name": "write_file",
}
WRITE_CANCELLED = {
    "sessionUpdate": "tool_call_update",
    "toolCallId": "call_write",
    "status": "failed",
    "content": text_result("cancelled"),
    "name": "write_file",
}


def test_cancel_during_a_permission_request_the_client_leaves_unanswered(tmp_path: Path) -> None:
    with PromptServer(tmp_path, permission_scenario()) as server:
        session = server.new_session()
        prompt, asked, before = start_until_permission(server, session)
        assert server.normalize(asked["params"]) == {
            "sessionId": "<session>",
            "toolCall": {
                "toolCallId": "call_write",
                "title": "Write notes.txt",
                "kind": "edit",
                "status": "pending",
                "rawInput": {"path": "notes.txt", "content": "x"},
            },
            "options": PERMISSION_OPTIONS,
        }
        server.cancel(session)
        answered = server.read_until_response(prompt, answer=False)

        assert answered.stop_reason == "cancelled"
        assert [server.normalize(f["params"]["update"]) for f in before] + answered.updates == [
            WRITE_ANNOUNCED,
            WRITE_CANCELLED,
        ]
        # The server gives up on its request and says so.
        assert answered.requests == [
            {"method": "$/cancel_request", "params": {"requestId": asked["id"]}}
        ]
        assert not (server.workspace / "notes.txt").exists()
        assert server.log(session) == cancelled_write_log()
        # A late answer is dropped without harm.
        server.reply(asked["id"], {"outcome": {"outcome": "cancelled"}})
        assert_next_prompt_works(server, session, 1)


def test_cancel_during_a_permission_request_the_client_then_answers_cancelled(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, permission_scenario()) as server:
        session = server.new_session()
        prompt, asked, before = start_until_permission(server, session)
        # As ACP asks of a client: cancel the turn, then answer the pending request `cancelled`
        # (one write, so both lines arrive together).
        cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}
        reply = {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"outcome": {"outcome": "cancelled"}},
        }
        server.process.send_raw(b"".join(json_line(m) for m in (cancel, reply)))
        answered = server.read_until_response(prompt, answer=False)

        assert answered.stop_reason == "cancelled"
        assert [server.normalize(f["params"]["update"]) for f in before] + answered.updates == [
            WRITE_ANNOUNCED,
            WRITE_CANCELLED,
        ]
        assert answered.requests == []
        assert not (server.workspace / "notes.txt").exists()
        assert server.log(session) == cancelled_write_log()
        assert_next_prompt_works(server, session, 1)


def test_cancel_while_a_command_runs_kills_it_and_ends_the_turn_cancelled(tmp_path: Path) -> None:
    script = "import time; open('started', 'w').close(); time.sleep(60)"
    call = ToolUse("call_run", "run_command", args(command=sys.executable, args=["-c", script]))
    scenario = Scenario([("run", [Step(calls=[call])]), ("again", [AGAIN])])
    with PromptServer(tmp_path, scenario) as server:
        server.client.permissions.append("allow_once")
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "run"))
        while True:  # up to the command's start, allowing it on the way
            frame = server.process.read_frame()
            if frame.get("method") == "session/request_permission":
                server.reply(frame["id"], server.client.answer(frame))
            elif frame["params"]["update"].get("status") == "in_progress":
                break
        wait_for_file(server.workspace / "started")
        server.cancel(session)
        # The command sleeps 60 s and each read gives up after TIMEOUT: an answer at all means
        # the command was killed, not waited for.
        answered = server.read_until_response(prompt)

        assert answered.stop_reason == "cancelled"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_run",
                "status": "failed",
                "content": text_result("cancelled"),
                "name": "run_command",
            }
        ]
        call_seq = 4 + len(step_chunks(Step(calls=[call])))
        assert server.log(session)[call_seq:] == [
            {
                "type": "tool/call",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_run",
                    "name": "run_command",
                    "arguments": call.arguments,
                },
            },
            decision("call_run", "allow_once"),
            {
                "type": "tool/result",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "callId": "call_run",
                    "content": [{"type": "text", "text": "cancelled"}],
                    "isError": True,
                },
                "sourceRange": [call_seq, call_seq],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "cancelled"}}},
        ]
        assert_next_prompt_works(server, session, 1)


def json_line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"
