"""`session/prompt` through the real server: what a model stream shows and logs (SPEC 1, 4.1).

Each test replays a fixture built from a compact step description and asserts three things: the
exact `session/update`s on the wire, the stop reason, and the exact events in the session log.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args, fragments, step_chunks
from prompt_harness import PromptServer, chunk_events, message_chunks, turn_opening

pytestmark = pytest.mark.process


def test_a_text_only_answer_streams_message_chunks_and_ends_the_turn(tmp_path: Path) -> None:
    step = Step(text="Hello! How can I help?", usage=(12, 7))
    with PromptServer(tmp_path, Scenario([("hi", [step])])) as server:
        session = server.new_session()
        answered = server.prompt(session, "hi")

        assert answered.stop_reason == "end_turn"
        assert answered.updates == [
            *message_chunks(
                ["Hel", "l", "o! H", "ow", " can ", "I h", "e", "lp?"], "assistant-0-0"
            ),
            # The call reported usage: its input plus output tokens, of llm-replay's window.
            {"sessionUpdate": "usage_update", "used": 19, "size": 128000},
        ]
        assert server.log(session) == [
            {"type": "turn/start", "data": {"turn": 0}},
            {
                "type": "user/message",
                "data": {
                    "turn": 0,
                    "message": {"id": "user-0", "content": [{"type": "text", "text": "hi"}]},
                },
            },
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            *chunk_events(0, 0, step_chunks(step)),
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [{"type": "text", "text": "Hello! How can I help?"}],
                    },
                    "usage": {"inputTokens": 12, "outputTokens": 7},
                },
                "sourceRange": [3, 14],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "completed"}}},
        ]


def test_reasoning_streams_as_thoughts_before_the_text(tmp_path: Path) -> None:
    step = Step(reasoning="Greet back.", text="Hi there.")
    with PromptServer(tmp_path, Scenario([("hello", [step])])) as server:
        session = server.new_session()
        answered = server.prompt(session, "hello")

        assert answered.stop_reason == "end_turn"
        assert answered.updates == [
            *message_chunks(
                ["Gre", "e", "t ba", "ck", "."], "assistant-0-0", "agent_thought_chunk"
            ),
            *message_chunks(["Hi ", "t", "here", "."], "assistant-0-0"),
        ]
        assert server.log(session) == [
            {"type": "turn/start", "data": {"turn": 0}},
            {
                "type": "user/message",
                "data": {
                    "turn": 0,
                    "message": {"id": "user-0", "content": [{"type": "text", "text": "hello"}]},
                },
            },
            {"type": "step/start", "data": {"turn": 0, "step": 0}},
            {
                "type": "assistant/chunk",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "chunk": {"type": "block-start", "index": 0, "blockType": "reasoning"},
                },
            },
            *chunk_events(
                0,
                0,
                [
                    {"type": "reasoning-delta", "index": 0, "text": t}
                    for t in ["Gre", "e", "t ba", "ck", "."]
                ],
            ),
            {
                "type": "assistant/chunk",
                "data": {"turn": 0, "step": 0, "chunk": {"type": "block-end", "index": 0}},
            },
            {
                "type": "assistant/chunk",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "chunk": {"type": "block-start", "index": 1, "blockType": "text"},
                },
            },
            *chunk_events(
                0,
                0,
                [{"type": "text-delta", "index": 1, "text": t} for t in ["Hi ", "t", "here", "."]],
            ),
            {
                "type": "assistant/chunk",
                "data": {"turn": 0, "step": 0, "chunk": {"type": "block-end", "index": 1}},
            },
            {
                "type": "assistant/chunk",
                "data": {"turn": 0, "step": 0, "chunk": {"type": "finish", "reason": "stop"}},
            },
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [
                            {"type": "reasoning", "text": "Greet back."},
                            {"type": "text", "text": "Hi there."},
                        ],
                    },
                },
                "sourceRange": [3, 16],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "completed"}}},
        ]


def _single_step_tail(server: PromptServer, session: str) -> list[dict]:
    """The log from the assistant message on (the turn's opening is the same in every test)."""
    return [
        e for e in server.log(session) if e["type"] in ("assistant/message", "step/end", "turn/end")
    ]


def test_finish_length_answers_max_tokens(tmp_path: Path) -> None:
    step = Step(text="The answer is", finish="length")
    with PromptServer(tmp_path, Scenario([("long", [step])])) as server:
        session = server.new_session()
        answered = server.prompt(session, "long")

        assert answered.stop_reason == "max_tokens"
        assert answered.text() == "The answer is"
        assert _single_step_tail(server, session) == [
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [{"type": "text", "text": "The answer is"}],
                    },
                },
                "sourceRange": [3, 10],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "max-tokens"}}},
        ]


def test_finish_content_filter_answers_refusal(tmp_path: Path) -> None:
    step = Step(text="I can't", finish="content-filter")
    with PromptServer(tmp_path, Scenario([("bad", [step])])) as server:
        session = server.new_session()
        answered = server.prompt(session, "bad")

        assert answered.stop_reason == "refusal"
        assert answered.updates == message_chunks(["I c", "a", "n't"], "assistant-0-0")
        assert _single_step_tail(server, session) == [
            {
                "type": "assistant/message",
                "data": {
                    "turn": 0,
                    "step": 0,
                    "message": {
                        "id": "assistant-0-0",
                        "content": [{"type": "text", "text": "I can't"}],
                    },
                },
                "sourceRange": [3, 8],
            },
            {"type": "step/end", "data": {"turn": 0, "step": 0}},
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "refusal"}}},
        ]


def _plan_step(n: int) -> Step:
    return Step(
        calls=[
            ToolUse(
                f"call_{n}",
                "todo_write",
                args(todos=[{"content": f"step {n}", "status": "pending"}]),
            )
        ]
    )


def test_max_steps_ends_the_turn_with_max_turn_requests(tmp_path: Path) -> None:
    # Three scripted model calls that each ask for a tool: the third is never requested.
    steps = [_plan_step(0), _plan_step(1), Step(text="never shown")]
    with PromptServer(tmp_path, Scenario([("plan", steps)]), "--max-steps", "2") as server:
        session = server.new_session()
        answered = server.prompt(session, "plan")

        assert answered.stop_reason == "max_turn_requests"
        plan_result = "Plan updated (1 item):\n[ ] step {}"
        assert answered.updates == [
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_0",
                "title": "Update the plan",
                "kind": "think",
                "status": "pending",
                "rawInput": {"todos": [{"content": "step 0", "status": "pending"}]},
                "name": "todo_write",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_0",
                "status": "in_progress",
                "name": "todo_write",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_0",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": plan_result.format(0)}}
                ],
                "name": "todo_write",
            },
            {
                "sessionUpdate": "plan",
                "entries": [{"content": "step 0", "priority": "medium", "status": "pending"}],
            },
            {
                "sessionUpdate": "tool_call",
                "toolCallId": "call_1",
                "title": "Update the plan",
                "kind": "think",
                "status": "pending",
                "rawInput": {"todos": [{"content": "step 1", "status": "pending"}]},
                "name": "todo_write",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_1",
                "status": "in_progress",
                "name": "todo_write",
            },
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_1",
                "status": "completed",
                "content": [
                    {"type": "content", "content": {"type": "text", "text": plan_result.format(1)}}
                ],
                "name": "todo_write",
            },
            {
                "sessionUpdate": "plan",
                "entries": [{"content": "step 1", "priority": "medium", "status": "pending"}],
            },
        ]
        assert server.log(session) == [
            *turn_opening(0, "plan"),
            *plan_step_events(0, 2, steps[0]),
            *plan_step_events(1, 2 + len(plan_step_events(0, 2, steps[0])), steps[1]),
            {"type": "turn/end", "data": {"turn": 0, "reason": {"kind": "max-steps"}}},
        ]


def plan_step_events(step: int, first_seq: int, plan: Step) -> list[dict]:
    """The events of a step that calls todo_write once, starting at seq `first_seq`."""
    call = plan.calls[0]
    n = len(step_chunks(plan))
    call_seq = first_seq + n + 2
    return [
        {"type": "step/start", "data": {"turn": 0, "step": step}},
        *chunk_events(0, step, step_chunks(plan)),
        {
            "type": "assistant/message",
            "data": {
                "turn": 0,
                "step": step,
                "message": {
                    "id": f"assistant-0-{step}",
                    "content": [
                        {
                            "type": "tool-call",
                            "id": call.id,
                            "name": "todo_write",
                            "arguments": call.arguments,
                        }
                    ],
                },
            },
            "sourceRange": [first_seq + 1, first_seq + n],
        },
        {
            "type": "tool/call",
            "data": {
                "turn": 0,
                "step": step,
                "callId": call.id,
                "name": "todo_write",
                "arguments": call.arguments,
            },
        },
        {
            "type": "tool/result",
            "data": {
                "turn": 0,
                "step": step,
                "callId": call.id,
                "content": [{"type": "text", "text": f"Plan updated (1 item):\n[ ] step {step}"}],
            },
            "sourceRange": [call_seq, call_seq],
        },
        {
            "type": "plan/update",
            "data": {
                "entries": [{"content": f"step {step}", "priority": "medium", "status": "pending"}]
            },
        },
        {"type": "step/end", "data": {"turn": 0, "step": step}},
    ]


def test_a_long_stream_shows_every_fragment_in_order(tmp_path: Path) -> None:
    text = "".join(f"Line {n} of a long answer.\n" for n in range(60))
    with PromptServer(tmp_path, Scenario([("long", [Step(text=text)])])) as server:
        session = server.new_session()
        answered = server.prompt(session, "long")

        assert answered.stop_reason == "end_turn"
        assert answered.text() == text
        assert len(answered.updates) == len(fragments(text)) == 518
        chunks = [e["data"]["chunk"] for e in server.log(session) if e["type"] == "assistant/chunk"]
        assert chunks == step_chunks(Step(text=text))
