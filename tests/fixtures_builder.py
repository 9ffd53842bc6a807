"""Build llm-replay fixtures (SPEC 5) from compact step descriptions (a test helper).

A scenario is a list of turns, each a prompt and the model's steps; a `Step` says what the model
streams in one call: reasoning, text, tool calls (with their raw argument JSON) and how it
finishes. `write_fixture` turns that into a projected, canonically packed `session.jsonl` with
`acp_server.core.replay_script.render_fixture`, plus an optional `replay.override.json` and
`session.N.jsonl` children for subagents.

Text and arguments are cut into small fragments deterministically (`fragments`), so tests can
compute the exact chunks and updates they expect with `step_chunks`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from acp_server.core.events import SessionEvent, convert_event
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.replay_script import render_fixture

FRAGMENT_SIZES = (3, 1, 4, 2, 5)
"""The lengths fragments cycle through: uneven, like a tokenizer's."""

FIXTURE_CWD = "/recorded"
"""The `cwd` written into built fixture headers (replay never reads it)."""


def fragments(text: str) -> list[str]:
    """`text` cut into pieces of 3, 1, 4, 2, 5, 3, 1, ... characters (the last may be shorter)."""
    pieces: list[str] = []
    start = 0
    while start < len(text):
        size = FRAGMENT_SIZES[len(pieces) % len(FRAGMENT_SIZES)]
        pieces.append(text[start : start + size])
        start += size
    return pieces


@dataclass(frozen=True)
class ToolUse:
    """One tool call the model makes: its id, the tool's name and the raw arguments JSON."""

    id: str
    name: str
    arguments: str
    result: str = "(recorded result)"
    """The result text written into the fixture (replay never reads it)."""


def args(**values: Any) -> str:
    """Arguments JSON the way a model writes it: `{"path": "a.txt"}`."""
    return json.dumps(values)


@dataclass(frozen=True)
class Step:
    """What one model call streams, in this order: reasoning, text, tool calls, usage, finish."""

    text: str = ""
    reasoning: str = ""
    calls: Sequence[ToolUse] = ()
    finish: str | None = None
    """Defaults to "tool-calls" when the step calls tools, else "stop"."""
    usage: tuple[int, int] | None = None
    """(inputTokens, outputTokens) of a `usage` chunk, if any."""

    @property
    def finish_reason(self) -> str:
        if self.finish is not None:
            return self.finish
        return "tool-calls" if self.calls else "stop"


def step_chunks(step: Step) -> list[dict[str, Any]]:
    """The stream chunks of `step`, as JSON values, exactly as the fixture records them."""
    chunks: list[dict[str, Any]] = []
    index = 0
    for kind, text in (("reasoning", step.reasoning), ("text", step.text)):
        if text:
            chunks.append({"type": "block-start", "index": index, "blockType": kind})
            chunks += [
                {"type": f"{kind}-delta", "index": index, "text": t} for t in fragments(text)
            ]
            chunks.append({"type": "block-end", "index": index})
            index += 1
    for call in step.calls:
        chunks.append({"type": "block-start", "index": index, "blockType": "tool-call"})
        for k, piece in enumerate(fragments(call.arguments) or [""]):
            delta = {
                "type": "tool-call-delta",
                "index": index,
                "id": call.id,
                "argumentsDelta": piece,
            }
            if k == 0:
                delta["name"] = call.name
            chunks.append(delta)
        chunks.append({"type": "block-end", "index": index})
        index += 1
    if step.usage is not None:
        chunks.append(
            {
                "type": "usage",
                "usage": {"inputTokens": step.usage[0], "outputTokens": step.usage[1]},
            }
        )
    chunks.append({"type": "finish", "reason": step.finish_reason})
    return chunks


def message_content(step: Step) -> list[dict[str, Any]]:
    """The `assistant/message` content a completed `step` assembles to."""
    content: list[dict[str, Any]] = []
    if step.reasoning:
        content.append({"type": "reasoning", "text": step.reasoning})
    if step.text:
        content.append({"type": "text", "text": step.text})
    content += [
        {"type": "tool-call", "id": c.id, "name": c.name, "arguments": c.arguments}
        for c in step.calls
    ]
    return content


_TURN_END = {
    "stop": "completed",
    "tool-calls": "completed",
    "length": "max-tokens",
    "content-filter": "refusal",
}


def turn_records(turn: int, prompt: str, steps: Sequence[Step]) -> list[dict[str, Any]]:
    """The events (type, data, sourceRange; no seq or time) a recorded turn holds, numbered
    from seq 0 of its own list: `write_fixture` renumbers them."""
    records: list[dict[str, Any]] = [
        {"type": "turn/start", "data": {"turn": turn}},
        {
            "type": "user/message",
            "data": {
                "turn": turn,
                "message": {"id": f"user-{turn}", "content": [{"type": "text", "text": prompt}]},
            },
        },
    ]
    for number, step in enumerate(steps):
        records.append({"type": "step/start", "data": {"turn": turn, "step": number}})
        first = len(records)
        records += [
            {"type": "assistant/chunk", "data": {"turn": turn, "step": number, "chunk": c}}
            for c in step_chunks(step)
        ]
        message: dict[str, Any] = {
            "turn": turn,
            "step": number,
            "message": {"id": f"assistant-{turn}-{number}", "content": message_content(step)},
        }
        if step.usage is not None:
            message["usage"] = {"inputTokens": step.usage[0], "outputTokens": step.usage[1]}
        records.append(
            {"type": "assistant/message", "data": message, "sourceRange": [first, len(records) - 1]}
        )
        for call in step.calls:
            records.append(
                {
                    "type": "tool/call",
                    "data": {
                        "turn": turn,
                        "step": number,
                        "callId": call.id,
                        "name": call.name,
                        "arguments": call.arguments,
                    },
                }
            )
            call_seq = len(records) - 1
            result = {
                "turn": turn,
                "step": number,
                "callId": call.id,
                "content": [{"type": "text", "text": call.result}],
            }
            records.append(
                {"type": "tool/result", "data": result, "sourceRange": [call_seq, call_seq]}
            )
        records.append({"type": "step/end", "data": {"turn": turn, "step": number}})
    last = steps[-1].finish_reason if steps else "stop"
    records.append(
        {"type": "turn/end", "data": {"turn": turn, "reason": {"kind": _TURN_END[last]}}}
    )
    return records


def _events(turns: Sequence[tuple[str, Sequence[Step]]]) -> list[SessionEvent]:
    events: list[SessionEvent] = []
    for turn, (prompt, steps) in enumerate(turns):
        offset = len(events)
        for record in turn_records(turn, prompt, steps):
            if "sourceRange" in record:
                record["sourceRange"] = [offset + s for s in record["sourceRange"]]
            events.append(convert_event({**record, "seq": len(events), "time": 0}))
    return events


def render(
    turns: Sequence[tuple[str, Sequence[Step]]],
    *,
    session_id: str = "recorded",
    subagent_of: str | None = None,
) -> bytes:
    """A projected, canonically packed fixture holding `turns` (a subagent's, with its parent)."""
    child: dict[str, Any] = (
        {} if subagent_of is None else {"parent_session": subagent_of, "origin": "subagent"}
    )
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id=session_id, created_at=0, cwd=FIXTURE_CWD, **child
    )
    return render_fixture(header, _events(turns))


@dataclass
class Scenario:
    """Everything `write_fixture` writes: the primary turns, an override, subagent children."""

    turns: Sequence[tuple[str, Sequence[Step]]]
    override: Any = None
    """The `replay.override.json` value (a list of entries or `{"patches": [...]}`), if any."""
    children: Sequence[Sequence[tuple[str, Sequence[Step]]]] = field(default_factory=list)
    """Subagent fixtures, written as `session.1.jsonl`, `session.2.jsonl`, ..."""


def write_fixture(directory: Path, scenario: Scenario) -> Path:
    """Write the scenario's files into `directory` (created if needed); returns `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "session.jsonl").write_bytes(render(scenario.turns))
    if scenario.override is not None:
        (directory / "replay.override.json").write_bytes(msgspec.json.encode(scenario.override))
    for number, child in enumerate(scenario.children, start=1):
        (directory / f"session.{number}.jsonl").write_bytes(
            render(child, session_id=f"recorded-{number}", subagent_of="recorded")
        )
    return directory
