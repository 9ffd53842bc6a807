"""An ACP agent built on the official `agent-client-protocol` SDK that loads acp-server session
logs: the baseline of `benchmarks/load.py`.

Run as `python benchmarks/sdk_load_agent.py SESSIONS_DIR`; it serves stdio with `acp.run_agent`
(asyncio's own event loop, the SDK's connection, router and pydantic models). It answers
`initialize` like `benchmarks/sdk_agent.py` and `session/load` the straightforward way, with the
standard library only on the read side:

1. it opens `SESSIONS_DIR/<sessionId>/session.jsonl` and parses it line by line with `json.loads`
   (line 1 is the header);
2. it expands every chunk row (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`) into its
   member events, as plain dicts `{type, seq, time, data: {turn, step, chunk}}` (SPEC 2.1), so
   that it holds the log's logical events;
3. it walks those events and builds the same completed-content replay as acp-server (SPEC 4.2):
   each `user/message` as one `user_message_chunk` per content block; each `assistant/message`
   as one `agent_thought_chunk` per reasoning block and one `agent_message_chunk` per text block
   (its message id as `messageId`), then each tool call as `tool_call` followed by its result's
   `tool_call_update`; a step with chunks but no message as the text and reasoning its chunks
   accumulated; `plan/update` as `plan`; `session/title` as `session_info_update`;
4. it sends each update with `conn.session_update(...)` (one `session/update` notification each,
   awaited in order), then answers `{}`.

So both agents put the same notifications on the wire for the same log; only the implementation
differs. Tool calls are shown with the tool name as title and kind "other" (acp-server derives
richer titles); the benchmark's conversation holds text only.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp import InitializeResponse, run_agent
from acp.schema import (
    AgentCapabilities,
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    Implementation,
    LoadSessionResponse,
    PlanEntry,
    PromptCapabilities,
    SessionCapabilities,
    SessionInfoUpdate,
    SessionListCapabilities,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    UserMessageChunk,
)

ROW_DELTAS = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta"}


def read_events(path: Path) -> list[dict[str, Any]]:
    """The log's logical events: every line parsed with `json`, every chunk row expanded."""
    events: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as file:
        file.readline()  # the header
        for line in file:
            record = json.loads(line)
            kind = record["type"]
            if kind in ROW_DELTAS or kind == "tool-call-chunks":
                data = record["data"]
                seq, time = record["seq0"], record["time0"]
                gaps = [0, *data["dt"]]
                if kind == "tool-call-chunks":
                    pieces = data["args"]
                    chunks = [
                        {
                            "type": "tool-call-delta",
                            "index": data["index"],
                            "id": data["id"],
                            "argumentsDelta": p,
                        }
                        for p in pieces
                    ]
                    if "name" in data:
                        for chunk in chunks:
                            chunk["name"] = data["name"]
                else:
                    delta = ROW_DELTAS[kind]
                    chunks = [
                        {"type": delta, "index": data["index"], "text": t} for t in data["texts"]
                    ]
                for k, chunk in enumerate(chunks):
                    time += gaps[k]
                    events.append(
                        {
                            "type": "assistant/chunk",
                            "seq": seq + k,
                            "time": time,
                            "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
                        }
                    )
            else:
                events.append(record)
    return events


def text_block(text: str) -> TextContentBlock:
    return TextContentBlock(type="text", text=text)


def replay_updates(events: list[dict[str, Any]]) -> list[Any]:
    """The completed-content replay of SPEC 4.2, as the SDK's update models."""
    results = {
        (e["data"]["turn"], e["data"]["step"], e["data"]["callId"]): e["data"]
        for e in events
        if e["type"] == "tool/result"
    }
    updates: list[Any] = []
    partial: dict[int, list[Any]] = {}  # block index -> [kind, parts], for a step's chunks
    partial_id = ""

    def flush_partial() -> None:
        for kind, parts in partial.values():
            text = "".join(parts)
            if text and kind == "reasoning":
                updates.append(
                    AgentThoughtChunk(
                        session_update="agent_thought_chunk",
                        content=text_block(text),
                        message_id=partial_id,
                    )
                )
            elif text and kind == "text":
                updates.append(
                    AgentMessageChunk(
                        session_update="agent_message_chunk",
                        content=text_block(text),
                        message_id=partial_id,
                    )
                )
        partial.clear()

    for event in events:
        kind = event["type"]
        data = event.get("data", {})
        if kind == "assistant/chunk":
            chunk = data["chunk"]
            if not partial:
                partial_id = f"assistant-{data['turn']}-{data['step']}"
            if chunk["type"] == "block-start":
                partial.setdefault(chunk["index"], [chunk["blockType"], []])
            elif chunk["type"] in ("text-delta", "reasoning-delta"):
                block_kind = "text" if chunk["type"] == "text-delta" else "reasoning"
                partial.setdefault(chunk["index"], [block_kind, []])[1].append(chunk["text"])
        elif kind == "assistant/message":
            partial.clear()  # the message stands for its chunks
            message = data["message"]
            for block in message["content"]:
                if block["type"] == "reasoning" and block["text"]:
                    updates.append(
                        AgentThoughtChunk(
                            session_update="agent_thought_chunk",
                            content=text_block(block["text"]),
                            message_id=message["id"],
                        )
                    )
                elif block["type"] == "text" and block["text"]:
                    updates.append(
                        AgentMessageChunk(
                            session_update="agent_message_chunk",
                            content=text_block(block["text"]),
                            message_id=message["id"],
                        )
                    )
            for block in message["content"]:
                if block["type"] == "tool-call":
                    updates.append(
                        ToolCallStart(
                            session_update="tool_call",
                            tool_call_id=block["id"],
                            title=block["name"],
                            kind="other",
                            status="pending",
                            raw_input=json.loads(block["arguments"])
                            if block["arguments"]
                            else None,
                        )
                    )
                    result = results.get((data["turn"], data["step"], block["id"]))
                    if result is not None:
                        updates.append(
                            ToolCallProgress(
                                session_update="tool_call_update",
                                tool_call_id=block["id"],
                                status="failed" if result.get("isError") else "completed",
                                content=[
                                    {"type": "content", "content": c} for c in result["content"]
                                ],
                                raw_output=result.get("rawOutput"),
                            )
                        )
        elif kind in ("step/start", "step/end", "turn/start", "turn/end"):
            flush_partial()
        elif kind == "user/message":
            flush_partial()
            message = data["message"]
            for block in message["content"]:
                updates.append(
                    UserMessageChunk(
                        session_update="user_message_chunk", content=block, message_id=message["id"]
                    )
                )
        elif kind == "plan/update":
            updates.append(
                AgentPlanUpdate(
                    session_update="plan", entries=[PlanEntry(**e) for e in data["entries"]]
                )
            )
        elif kind == "session/title":
            updates.append(
                SessionInfoUpdate(session_update="session_info_update", title=data["title"])
            )
    flush_partial()
    return updates


class LoadAgent:
    """`initialize` and `session/load`; the SDK answers -32601 for the rest."""

    def __init__(self, sessions_dir: Path) -> None:
        self.sessions_dir = sessions_dir
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=1,
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=False, audio=False, embedded_context=True
                ),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="sdk-load-bench-agent", version="0"),
            auth_methods=[],
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kwargs: Any
    ) -> LoadSessionResponse:
        events = read_events(self.sessions_dir / session_id / "session.jsonl")
        for update in replay_updates(events):
            await self.conn.session_update(session_id, update)
        return LoadSessionResponse()


def main() -> None:
    asyncio.run(run_agent(LoadAgent(Path(sys.argv[1]))))  # type: ignore[arg-type]  # implements only the Agent methods the benchmark uses


if __name__ == "__main__":
    main()
