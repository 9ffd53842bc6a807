"""The conversation fold: a session's events, in seq order, folded into the nodes a client shows
(the same fold as `acp_server/web/fold.js`, node for node).

A small registry of node definitions (user message, assistant text, thought, tool call, plan,
title, mode change) turns events into nodes. No I/O: events in, changes out.

How a definition claims events: it names the event `type`s it claims (`claims`). The fold
hands every event, exactly once and in seq order, to each definition that claims its type, in
registry order, as the event's plain JSON (the wire form: camelCase keys, absent optionals
absent), whether the event came from a packed history page (expanded to exact events first) or
from a live follow frame: packing changes the transport, never what a definition sees. Each
definition keeps what it remembers between events in `ctx.state`, a dict of its own.

What a definition says: through `ctx.start(node)` and `ctx.update(node_id, set=..., append=...)`,
which the fold returns as changes, in order:

    {"op": "start",  "seq": s, "node": Node}
    {"op": "update", "seq": s, "id": id, "set": {field: value}, "append": {field: str}}

`seq` is the event that caused the change; an update replaces each `set` field and appends each
`append` string to its field (streamed text grows by its deltas, never re-sent whole).
`apply_change` is the rule, for a client that keeps the nodes itself.

A node is a dict of plain JSON values with camelCase keys; every node has `id` (stable, derived
from the events, so a UI can update in place), `kind`, `seq` (the event that started it) and
`lastSeq` (the last event that changed it). Absent values are `null`, never missing keys:

- `user`: `id` "user/<messageId>", `turn`, `messageId`, `content` (ACP content blocks).
- `text` / `thought`: one assistant text or reasoning block. `id` "<kind>/<turn>/<step>/<index>"
  (the stream's block index; "m<position>" for a block known only from its `assistant/message`),
  `turn`, `step`, `index`, `messageId` (null until the message), `text`, `deltas` (the deltas
  folded in), `status`: "streaming"; "done" or "interrupted" once the step's
  `assistant/message` settles the block with its whole text; "incomplete" when the step (or
  turn) ends without one, which keeps what streamed.
- `tool`: one tool call. `id` "tool/<callId>", `turn`, `step`, `callId`, `name`, `title`,
  `toolKind` (ACP's tool kind), `status`: "pending" while its arguments stream, "in_progress"
  from its `tool/call` (the model finished it; the call runs), then "completed" or "failed" from
  its `tool/result`, or "failed" when its step ends without a `tool/call` (a cut stream);
  `arguments` (the raw text), `input` (the parsed arguments, or the raw text when they are not
  JSON; null before the `tool/call`), `output` (the result's content blocks, null before it),
  `rawOutput`, `locations`, `childSessionId` (a subagent's session).
- `plan`: `id` "plan", `entries` (each update replaces the plan).
- `title`: `id` "title", `title`.
- `mode`: a mode change. `id` "mode/<seq>", `modeId`.

Events no definition claims (turn and step boundaries, config changes, usage) change no node.
A tool call's title and kind belong to the server's tool registry, which events do not carry:
`tool_call_definition(present)` takes a presenter; the default shows the tool's name, kind
"other". Parsed arguments are JSON values: an integer beyond 2**53 is exact here and rounded in
JavaScript.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from ..core.acp_updates import parse_arguments
from ..core.events import SessionEvent

Node = dict[str, Any]
Change = dict[str, Any]
Presenter = Callable[[str, Any], Mapping[str, Any]]
"""A tool call's presentation from its name and parsed input: `{title, kind, locations?}`."""


class FoldError(ValueError):
    """The events are not one session's, in seq order, each once; or a definition misbehaved."""


class FoldContext:
    """What one definition sees of the fold: its own state, the nodes, and the two changes."""

    def __init__(self, fold: ConversationFold) -> None:
        self._fold = fold
        self.state: dict[Any, Any] = {}
        """The definition's memory between events (the fold never reads it)."""

    def node(self, node_id: str) -> Node | None:
        """The node's current form (read it, do not change it), or None."""
        return self._fold.node(node_id)

    def has(self, node_id: str) -> bool:
        return node_id in self._fold._nodes

    def start(self, node: Node) -> None:
        self._fold._start(node)

    def update(
        self,
        node_id: str,
        set: Mapping[str, Any] | None = None,
        append: Mapping[str, str] | None = None,
    ) -> None:
        self._fold._update(node_id, dict(set or {}), dict(append or {}))


class NodeDefinition(Protocol):
    """One kind of node: the event types it claims, and how it folds one of them."""

    @property
    def name(self) -> str: ...

    @property
    def claims(self) -> Sequence[str]: ...

    def fold(self, event: dict[str, Any], ctx: FoldContext) -> None: ...


class ConversationFold:
    """The nodes of one session's conversation, grown event by event.

    `feed` takes the events in seq order, each once (from any starting seq: a client may hold
    only the newest pages), and returns the changes each made. To fold again from older
    history (a page prepended) or after a rewind, start a new fold.
    """

    def __init__(self, definitions: Sequence[NodeDefinition] | None = None) -> None:
        self._definitions = list(default_definitions() if definitions is None else definitions)
        self._by_type: dict[str, list[tuple[NodeDefinition, FoldContext]]] = {}
        for definition in self._definitions:
            ctx = FoldContext(self)
            for event_type in definition.claims:
                self._by_type.setdefault(event_type, []).append((definition, ctx))
        self._nodes: dict[str, Node] = {}
        self._parts: dict[str, dict[str, list[str]]] = {}
        """Appended strings not yet joined into their node (joined when the node is read), so
        a long stream costs one append per delta, not one copy of its text."""
        self._changes: list[Change] = []
        self._seq: int = -1
        self._last_seq: int | None = None

    @property
    def last_seq(self) -> int | None:
        """The seq of the last event fed, or None before the first."""
        return self._last_seq

    def feed(self, event: SessionEvent | Mapping[str, Any]) -> list[Change]:
        """Fold one event; the changes it made, in order."""
        value: dict[str, Any] = (
            msgspec.to_builtins(event) if isinstance(event, msgspec.Struct) else dict(event)
        )
        seq = value.get("seq")
        if type(seq) is not int:
            raise FoldError(f"an event without an integer seq: {seq!r}")
        if self._last_seq is not None and seq != self._last_seq + 1:
            raise FoldError(
                f"seq {seq} after seq {self._last_seq}: events are folded in seq order, each once"
            )
        self._last_seq = self._seq = seq
        self._changes = []
        for definition, ctx in self._by_type.get(value.get("type", ""), ()):
            definition.fold(value, ctx)
        return self._changes

    def feed_all(self, events: Iterable[SessionEvent | Mapping[str, Any]]) -> list[Change]:
        """Fold events in order; every change they made."""
        changes: list[Change] = []
        for event in events:
            changes.extend(self.feed(event))
        return changes

    def node(self, node_id: str) -> Node | None:
        node = self._nodes.get(node_id)
        if node is None:
            return None
        parts = self._parts.pop(node_id, None)
        if parts:
            for key, pieces in parts.items():
                node[key] = node[key] + "".join(pieces)
        return node

    def nodes(self) -> list[Node]:
        """Every node, in the order they started (copies)."""
        return [dict(self.node(node_id) or {}) for node_id in self._nodes]

    def _start(self, node: Node) -> None:
        node_id = node.get("id")
        if not isinstance(node_id, str):
            raise FoldError(f"a node needs a string id: {node!r}")
        if node_id in self._nodes:
            raise FoldError(f"node {node_id!r} started twice")
        self._nodes[node_id] = dict(node)
        self._changes.append({"op": "start", "seq": self._seq, "node": dict(node)})

    def _update(self, node_id: str, set_: dict[str, Any], append: dict[str, str]) -> None:
        node = self._nodes.get(node_id)
        if node is None:
            raise FoldError(f"update of node {node_id!r}, which never started")
        if append:
            parts = self._parts.setdefault(node_id, {})
            for key, text in append.items():
                if key in set_:
                    raise FoldError(f"node {node_id!r}: {key!r} both set and appended")
                parts.setdefault(key, []).append(text)
        for key, value in set_.items():
            parts_of = self._parts.get(node_id)
            if parts_of is not None:
                parts_of.pop(key, None)
            node[key] = value
        self._changes.append(
            {"op": "update", "seq": self._seq, "id": node_id, "set": set_, "append": append}
        )


def apply_change(nodes: dict[str, Node], change: Change) -> None:
    """Apply one change to nodes kept by id (what a client does to show the fold)."""
    if change["op"] == "start":
        node = change["node"]
        nodes[node["id"]] = dict(node)
        return
    node = nodes[change["id"]]
    node.update(change["set"])
    for key, text in change["append"].items():
        node[key] = node[key] + text


def fold_events(
    events: Iterable[SessionEvent | Mapping[str, Any]],
    definitions: Sequence[NodeDefinition] | None = None,
) -> tuple[list[Change], list[Node]]:
    """Fold a whole sequence at once: its changes and the final nodes."""
    fold = ConversationFold(definitions)
    changes = fold.feed_all(events)
    return changes, fold.nodes()


# ---------------------------------------------------------------------------------------------
# The definitions.


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


__all__ = [
    "ASSISTANT_TEXT",
    "MODE",
    "PLAN",
    "THOUGHT",
    "TITLE",
    "USER_MESSAGE",
    "Change",
    "ConversationFold",
    "FoldContext",
    "FoldError",
    "Node",
    "NodeDefinition",
    "Presenter",
    "apply_change",
    "default_definitions",
    "default_present",
    "fold_events",
    "tool_call_definition",
]
