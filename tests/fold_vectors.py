"""The conversation fold's vectors (`tests/vectors/fold/*.json`), shared by the Python and the
JavaScript fold tests so that both clients agree node for node.

Each vector is one session: its `events` (plain JSON, seq order), the same events as the
history `records` a `session.page` would carry (packed canonically: `{event}` and `{chunks}`),
and what the Python fold makes of them: `changes` and the final `nodes`. The sessions are
recorded snapshot fixtures (what the server wrote for those scenarios) and one hand-written
session that holds every node kind and the ends a stream can have.

    .venv/bin/python tests/fold_vectors.py    # rewrites tests/vectors/fold/
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from acp_server.client.fold import fold_events
from acp_server.core.chunk_rows import pack_chunk_runs
from acp_server.core.events import SessionEvent, convert_event
from acp_server.core.history import to_history_records
from acp_server.core.replay_script import parse_fixture

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors" / "fold"

SNAPSHOT_SESSIONS = (
    "plain-text",
    "tool-error",
    "cancel-mid-stream",
    "stream-failure",
    "long-reasoning",
    "todo-plan",
    "slash-commands",
    "mode-plan-refuses-write",
    "subagent-task",
)
"""Scenarios whose recorded session the fold is run on: text, reasoning, tools that fail and
succeed, a cancelled and a failed stream, a plan, a title, mode changes, a subagent."""


def _chunk(turn: int, step: int, chunk: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}


def _text_deltas(
    turn: int, step: int, index: int, kind: str, pieces: list[str]
) -> list[tuple[str, dict[str, Any]]]:
    return [_chunk(turn, step, {"type": kind, "index": index, "text": p}) for p in pieces]


def hand_written_events() -> list[dict[str, Any]]:
    """A session with every node kind: reasoning and text that stream and settle, a tool call
    whose name comes in a later delta and that fails, one that succeeds and starts a subagent,
    a plan changed twice, a title, a mode change, a step known only from its message, a
    cancelled stream (its empty block and cut tool call left out of the message) and a failed
    stream that leaves only its chunks."""
    body: list[tuple[str, dict[str, Any]]] = [
        ("session/mode", {"modeId": "plan"}),
        ("turn/start", {"turn": 0}),
        (
            "user/message",
            {"turn": 0, "message": {"id": "user-0", "content": [{"type": "text", "text": "Hi"}]}},
        ),
        ("step/start", {"turn": 0, "step": 0}),
        _chunk(0, 0, {"type": "block-start", "index": 0, "blockType": "reasoning"}),
        *_text_deltas(0, 0, 0, "reasoning-delta", ["Think", "ing", " hard"]),
        _chunk(0, 0, {"type": "block-end", "index": 0}),
        *_text_deltas(0, 0, 1, "text-delta", ["Let", " me", " look", "."]),
        _chunk(0, 0, {"type": "block-start", "index": 2, "blockType": "tool-call"}),
        _chunk(0, 0, {"type": "tool-call-delta", "index": 2, "id": "call-a", "argumentsDelta": ""}),
        _chunk(
            0,
            0,
            {
                "type": "tool-call-delta",
                "index": 2,
                "id": "call-a",
                "argumentsDelta": '{"path":',
                "name": "read_file",
            },
        ),
        _chunk(
            0, 0, {"type": "tool-call-delta", "index": 2, "id": "call-a", "argumentsDelta": ' "a"'}
        ),
        _chunk(
            0, 0, {"type": "tool-call-delta", "index": 2, "id": "call-a", "argumentsDelta": "}"}
        ),
        _chunk(0, 0, {"type": "usage", "usage": {"inputTokens": 10, "outputTokens": 5}}),
        _chunk(0, 0, {"type": "finish", "reason": "tool-calls"}),
        (
            "assistant/message",
            {
                "turn": 0,
                "step": 0,
                "message": {
                    "id": "assistant-0-0",
                    "content": [
                        {"type": "reasoning", "text": "Thinking hard"},
                        {"type": "text", "text": "Let me look."},
                        {
                            "type": "tool-call",
                            "id": "call-a",
                            "name": "read_file",
                            "arguments": '{"path": "a"}',
                        },
                    ],
                },
            },
        ),
        (
            "tool/call",
            {
                "turn": 0,
                "step": 0,
                "callId": "call-a",
                "name": "read_file",
                "arguments": '{"path": "a"}',
            },
        ),
        (
            "tool/result",
            {
                "turn": 0,
                "step": 0,
                "callId": "call-a",
                "content": [{"type": "text", "text": "cannot read a"}],
                "isError": True,
                "rawOutput": {"error": "ENOENT"},
                "locations": [{"path": "/w/a", "line": 1}],
            },
        ),
        ("step/end", {"turn": 0, "step": 0}),
        ("step/start", {"turn": 0, "step": 1}),
        (
            "assistant/message",
            {
                "turn": 0,
                "step": 1,
                "message": {
                    "id": "assistant-0-1",
                    "content": [
                        {"type": "text", "text": "Delegating."},
                        {
                            "type": "tool-call",
                            "id": "call-b",
                            "name": "task",
                            "arguments": "not json",
                        },
                    ],
                },
            },
        ),
        (
            "tool/call",
            {"turn": 0, "step": 1, "callId": "call-b", "name": "task", "arguments": "not json"},
        ),
        (
            "subagent/start",
            {
                "turn": 0,
                "step": 1,
                "callId": "call-b",
                "childSessionId": "child-1",
                "mode": "one-shot",
            },
        ),
        (
            "tool/result",
            {
                "turn": 0,
                "step": 1,
                "callId": "call-b",
                "content": [{"type": "text", "text": "done"}],
            },
        ),
        ("step/end", {"turn": 0, "step": 1}),
        (
            "plan/update",
            {"entries": [{"content": "Look", "priority": "high", "status": "in_progress"}]},
        ),
        (
            "plan/update",
            {"entries": [{"content": "Look", "priority": "high", "status": "completed"}]},
        ),
        ("session/title", {"title": "Looking at a"}),
        ("turn/end", {"turn": 0, "reason": {"kind": "completed"}}),
        ("session/mode", {"modeId": "default"}),
        ("turn/start", {"turn": 1}),
        (
            "user/message",
            {"turn": 1, "message": {"id": "user-1", "content": [{"type": "text", "text": "Go"}]}},
        ),
        ("step/start", {"turn": 1, "step": 0}),
        _chunk(1, 0, {"type": "block-start", "index": 0, "blockType": "text"}),
        _chunk(1, 0, {"type": "block-end", "index": 0}),
        *_text_deltas(1, 0, 1, "text-delta", ["Part", "ial"]),
        _chunk(
            1,
            0,
            {
                "type": "tool-call-delta",
                "index": 2,
                "id": "call-c",
                "argumentsDelta": "{",
                "name": "grep",
            },
        ),
        (
            "assistant/message",
            {
                "turn": 1,
                "step": 0,
                "message": {
                    "id": "assistant-1-0",
                    "content": [{"type": "text", "text": "Partial"}],
                },
                "interrupted": True,
            },
        ),
        ("step/end", {"turn": 1, "step": 0}),
        ("turn/end", {"turn": 1, "reason": {"kind": "cancelled"}}),
        ("turn/start", {"turn": 2}),
        (
            "user/message",
            {
                "turn": 2,
                "message": {"id": "user-2", "content": [{"type": "text", "text": "Again"}]},
            },
        ),
        ("step/start", {"turn": 2, "step": 0}),
        *_text_deltas(2, 0, 0, "reasoning-delta", ["Hm"]),
        *_text_deltas(2, 0, 1, "text-delta", ["The ", "answer 😀 ", "is"]),
        ("step/end", {"turn": 2, "step": 0}),
        (
            "turn/end",
            {"turn": 2, "reason": {"kind": "error", "error": {"message": "stream failed"}}},
        ),
    ]
    events = [
        {"type": kind, "seq": seq, "time": 1000 + 10 * seq, "data": data}
        for seq, (kind, data) in enumerate(body)
    ]
    for event in events:
        convert_event(event)  # every event is one the log could hold
    return events


def snapshot_events(name: str) -> list[dict[str, Any]]:
    path = ROOT / "snapshots" / name / "session.jsonl"
    fixture = parse_fixture(name, path.read_bytes().splitlines())
    return [msgspec.to_builtins(event) for event in fixture.events]


def history_records(events: list[dict[str, Any]]) -> list[Any]:
    """The events as one page's records, packed canonically (SPEC 2.2)."""
    typed: list[SessionEvent] = [convert_event(event) for event in events]
    return msgspec.to_builtins(to_history_records(pack_chunk_runs(typed)))  # type: ignore[no-any-return]


def vector(name: str, source: str, events: list[dict[str, Any]]) -> dict[str, Any]:
    changes, nodes = fold_events(events)
    return {
        "name": name,
        "source": source,
        "events": events,
        "records": history_records(events),
        "changes": changes,
        "nodes": nodes,
    }


def all_vectors() -> dict[str, dict[str, Any]]:
    vectors = {"every-node-kind": vector("every-node-kind", "hand-written", hand_written_events())}
    for name in SNAPSHOT_SESSIONS:
        source = f"snapshots/{name}/session.jsonl"
        vectors[name] = vector(name, source, snapshot_events(name))
    return vectors


def render(value: dict[str, Any]) -> str:
    """One vector as JSON text: one list member a line, so that a change reads as a diff."""
    lines = ["{"]
    keys = list(value)
    for k, key in enumerate(keys):
        item = value[key]
        comma = "," if k < len(keys) - 1 else ""
        if isinstance(item, list):
            members = [json.dumps(member, ensure_ascii=False) for member in item]
            body = ",\n  ".join(members)
            lines.append(f'"{key}": [\n  {body}\n]{comma}' if members else f'"{key}": []{comma}')
        else:
            lines.append(f"{json.dumps(key)}: {json.dumps(item, ensure_ascii=False)}{comma}")
    return "\n".join(lines) + "\n}\n"


def main() -> None:
    VECTORS.mkdir(parents=True, exist_ok=True)
    for name, value in all_vectors().items():
        (VECTORS / f"{name}.json").write_text(render(value), encoding="utf-8")


if __name__ == "__main__":
    main()
