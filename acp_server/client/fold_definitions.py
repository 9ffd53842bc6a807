"""The conversation fold's node definitions (user message, assistant text, thought, tool call,
plan, title, mode change) and the registry of them, in the order they receive an event; what
each node holds is in `fold`'s docstring, and `web/fold.js` defines the same nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.acp_updates import parse_arguments
from .fold_context import FoldContext, Node, NodeDefinition, Presenter


def _step_key(data: Mapping[str, Any]) -> str:
    return f"{data['turn']}/{data['step']}"


class UserMessageDefinition:
    name = "user"
    claims = ("user/message",)

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None:
        data = event["data"]
        message = data["message"]
        node_id = f"user/{message['id']}"
        if ctx.has(node_id):
            ctx.update(node_id, {"lastSeq": event["seq"], "content": message["content"]})
            return
        ctx.start(
            {
                "id": node_id,
                "kind": "user",
                "seq": event["seq"],
                "lastSeq": event["seq"],
                "turn": data["turn"],
                "messageId": message["id"],
                "content": message["content"],
            }
        )


class StreamedBlockDefinition:
    """Assistant text or reasoning: grown by its deltas, settled by the step's message.

    The message's blocks of this kind are matched, in order, to the step's streamed blocks of
    this kind in the order they first appeared (an interrupted message leaves out the blocks
    that received no text, so those are skipped in matching)."""

    claims = ("assistant/chunk", "assistant/message", "step/end", "turn/end")

    def __init__(self, kind: str, block_type: str, delta_type: str) -> None:
        self.name = kind
        self.kind = kind
        self.block_type = block_type
        self.delta_type = delta_type

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None:
        kind = event["type"]
        if kind == "assistant/chunk":
            self._chunk(event, ctx)
        elif kind == "assistant/message":
            self._message(event, ctx)
        elif kind == "step/end":
            self._end(event, ctx, [_step_key(event["data"])])
        else:
            turn = event["data"]["turn"]
            steps = ctx.state.setdefault("steps", {})
            self._end(event, ctx, [key for key in steps if key.split("/")[0] == str(turn)])

    def _chunk(self, event: dict[str, Any], ctx: FoldContext) -> None:
        data = event["data"]
        chunk = data["chunk"]
        if chunk["type"] == "block-start":
            if chunk["blockType"] == self.block_type:
                self._open(event, ctx, chunk["index"], "")
        elif chunk["type"] == self.delta_type:
            node_id = self._id(data, chunk["index"])
            if not ctx.has(node_id):
                self._open(event, ctx, chunk["index"], chunk["text"])
                return
            deltas = ctx.state["deltas"][node_id] + 1
            ctx.state["deltas"][node_id] = deltas
            if chunk["text"]:
                ctx.state["texted"][node_id] = True
            ctx.update(
                node_id, {"lastSeq": event["seq"], "deltas": deltas}, {"text": chunk["text"]}
            )

    def _id(self, data: Mapping[str, Any], index: Any) -> str:
        return f"{self.kind}/{data['turn']}/{data['step']}/{index}"

    def _open(self, event: dict[str, Any], ctx: FoldContext, index: int, text: str) -> None:
        data = event["data"]
        node_id = self._id(data, index)
        if ctx.has(node_id):
            return
        deltas = 0 if event["data"]["chunk"]["type"] == "block-start" else 1
        ctx.state.setdefault("steps", {}).setdefault(_step_key(data), []).append(node_id)
        ctx.state.setdefault("deltas", {})[node_id] = deltas
        ctx.state.setdefault("texted", {})[node_id] = text != ""
        ctx.state.setdefault("status", {})[node_id] = "streaming"
        ctx.start(self._node(event, node_id, index, text, deltas, "streaming", None))

    def _node(
        self,
        event: dict[str, Any],
        node_id: str,
        index: int,
        text: str,
        deltas: int,
        status: str,
        message_id: str | None,
    ) -> Node:
        data = event["data"]
        return {
            "id": node_id,
            "kind": self.kind,
            "seq": event["seq"],
            "lastSeq": event["seq"],
            "turn": data["turn"],
            "step": data["step"],
            "index": index,
            "messageId": message_id,
            "text": text,
            "deltas": deltas,
            "status": status,
        }

    def _message(self, event: dict[str, Any], ctx: FoldContext) -> None:
        data = event["data"]
        message = data["message"]
        status = "interrupted" if data.get("interrupted") is True else "done"
        streamed: list[str] = ctx.state.setdefault("steps", {}).setdefault(_step_key(data), [])
        texted = ctx.state.setdefault("texted", {})
        statuses = ctx.state.setdefault("status", {})
        candidates = [i for i in streamed if status == "done" or texted[i]]
        blocks = [
            (position, block)
            for position, block in enumerate(message["content"])
            if block["type"] == self.block_type
        ]
        settled: dict[str, bool] = {}
        for node_id, (_, block) in zip(candidates, blocks, strict=False):
            settled[node_id] = True
            statuses[node_id] = status
            ctx.update(
                node_id,
                {
                    "lastSeq": event["seq"],
                    "messageId": message["id"],
                    "text": block["text"],
                    "status": status,
                },
            )
        for node_id in streamed:
            if node_id not in settled and statuses[node_id] == "streaming":
                statuses[node_id] = status
                ctx.update(
                    node_id,
                    {"lastSeq": event["seq"], "messageId": message["id"], "status": status},
                )
        for position, block in blocks[len(candidates) :]:
            node_id = self._id(data, f"m{position}")
            if ctx.has(node_id):
                continue
            streamed.append(node_id)
            texted[node_id] = block["text"] != ""
            statuses[node_id] = status
            ctx.state.setdefault("deltas", {})[node_id] = 0
            ctx.start(self._node(event, node_id, position, block["text"], 0, status, message["id"]))

    def _end(self, event: dict[str, Any], ctx: FoldContext, keys: list[str]) -> None:
        steps = ctx.state.setdefault("steps", {})
        statuses = ctx.state.setdefault("status", {})
        for key in keys:
            for node_id in steps.get(key, ()):
                if statuses[node_id] == "streaming":
                    statuses[node_id] = "incomplete"
                    ctx.update(node_id, {"lastSeq": event["seq"], "status": "incomplete"})


def default_present(name: str, tool_input: Any) -> dict[str, Any]:
    """A call shown by its tool's name, kind "other" (the fold does not know the tools)."""
    return {"title": name, "kind": "other", "locations": []}


class ToolCallDefinition:
    """A tool call, from its streamed arguments through its `tool/call` to its result."""

    name = "tool"
    claims = (
        "assistant/chunk",
        "assistant/message",
        "tool/call",
        "tool/result",
        "subagent/start",
        "step/end",
    )

    def __init__(self, present: Presenter = default_present) -> None:
        self.present = present

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None:
        kind = event["type"]
        data = event["data"]
        seq = event["seq"]
        if kind == "assistant/chunk":
            chunk = data["chunk"]
            if chunk["type"] == "tool-call-delta":
                self._delta(event, ctx, chunk)
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block["type"] != "tool-call":
                    continue
                node_id = f"tool/{block['id']}"
                if ctx.has(node_id):
                    ctx.update(
                        node_id,
                        {"lastSeq": seq, "name": block["name"], "arguments": block["arguments"]},
                    )
                else:
                    self._start(event, ctx, block["id"], block["name"], block["arguments"])
        elif kind == "tool/call":
            node_id = f"tool/{data['callId']}"
            tool_input = parse_arguments(data["arguments"])
            shown = self.present(data["name"], tool_input)
            called = {
                "lastSeq": seq,
                "name": data["name"],
                "title": shown["title"],
                "toolKind": shown["kind"],
                "status": "in_progress",
                "arguments": data["arguments"],
                "input": tool_input,
                "locations": list(shown.get("locations") or []),
            }
            if ctx.has(node_id):
                ctx.update(node_id, called)
            else:
                self._start(event, ctx, data["callId"], data["name"], data["arguments"], called)
            ctx.state["status"][node_id] = "in_progress"
        elif kind == "tool/result":
            node_id = f"tool/{data['callId']}"
            status = "failed" if data.get("isError") is True else "completed"
            result: dict[str, Any] = {"lastSeq": seq, "status": status, "output": data["content"]}
            if "rawOutput" in data:
                result["rawOutput"] = data["rawOutput"]
            if "locations" in data:
                result["locations"] = data["locations"]
            if ctx.has(node_id):
                ctx.update(node_id, result)
            else:  # its call is older than the history held
                self._start(event, ctx, data["callId"], "", "", result)
            ctx.state["status"][node_id] = status
        elif kind == "subagent/start":
            node_id = f"tool/{data['callId']}"
            if ctx.has(node_id):
                ctx.update(node_id, {"lastSeq": seq, "childSessionId": data["childSessionId"]})
        else:
            statuses = ctx.state.setdefault("status", {})
            for node_id in ctx.state.setdefault("steps", {}).get(_step_key(data), ()):
                if statuses[node_id] == "pending":
                    statuses[node_id] = "failed"
                    ctx.update(node_id, {"lastSeq": seq, "status": "failed"})

    def _delta(self, event: dict[str, Any], ctx: FoldContext, chunk: dict[str, Any]) -> None:
        node_id = f"tool/{chunk['id']}"
        name = chunk.get("name")
        if not ctx.has(node_id):
            self._start(event, ctx, chunk["id"], name or "", chunk["argumentsDelta"])
            return
        changed: dict[str, Any] = {"lastSeq": event["seq"]}
        if isinstance(name, str) and not ctx.state["names"][node_id]:
            ctx.state["names"][node_id] = name
            changed["name"] = changed["title"] = name
        ctx.update(node_id, changed, {"arguments": chunk["argumentsDelta"]})

    def _start(
        self,
        event: dict[str, Any],
        ctx: FoldContext,
        call_id: str,
        name: str,
        arguments: str,
        known: Mapping[str, Any] | None = None,
    ) -> None:
        data = event["data"]
        node_id = f"tool/{call_id}"
        ctx.state.setdefault("steps", {}).setdefault(_step_key(data), []).append(node_id)
        ctx.state.setdefault("status", {})[node_id] = "pending"
        ctx.state.setdefault("names", {})[node_id] = name
        ctx.start(
            {
                "id": node_id,
                "kind": "tool",
                "seq": event["seq"],
                "lastSeq": event["seq"],
                "turn": data["turn"],
                "step": data["step"],
                "callId": call_id,
                "name": name,
                "title": name,
                "toolKind": "other",
                "status": "pending",
                "arguments": arguments,
                "input": None,
                "output": None,
                "rawOutput": None,
                "locations": [],
                "childSessionId": None,
            }
            | dict(known or {})
        )


class _SingletonDefinition:
    """A node the session has one of, replaced by each event that says it anew."""

    def __init__(self, name: str, claims: str, field: str) -> None:
        self.name = name
        self.claims = (claims,)
        self._field = field

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None:
        value = event["data"][self._field]
        if ctx.has(self.name):
            ctx.update(self.name, {"lastSeq": event["seq"], self._field: value})
            return
        ctx.start(
            {
                "id": self.name,
                "kind": self.name,
                "seq": event["seq"],
                "lastSeq": event["seq"],
                self._field: value,
            }
        )


class ModeDefinition:
    """Each mode change is a node where it happened."""

    name = "mode"
    claims = ("session/mode",)

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None:
        seq = event["seq"]
        ctx.start(
            {
                "id": f"mode/{seq}",
                "kind": "mode",
                "seq": seq,
                "lastSeq": seq,
                "modeId": event["data"]["modeId"],
            }
        )


USER_MESSAGE = UserMessageDefinition()
ASSISTANT_TEXT = StreamedBlockDefinition("text", "text", "text-delta")
THOUGHT = StreamedBlockDefinition("thought", "reasoning", "reasoning-delta")
PLAN = _SingletonDefinition("plan", "plan/update", "entries")
TITLE = _SingletonDefinition("title", "session/title", "title")
MODE = ModeDefinition()


def tool_call_definition(present: Presenter = default_present) -> ToolCallDefinition:
    return ToolCallDefinition(present)


def default_definitions(present: Presenter = default_present) -> list[NodeDefinition]:
    """The registry, in the order definitions receive an event."""
    return [USER_MESSAGE, THOUGHT, ASSISTANT_TEXT, tool_call_definition(present), PLAN, TITLE, MODE]
