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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..core.events import SessionEvent
from .fold_context import Change, FoldContext, FoldError, Node, NodeDefinition, Presenter
from .fold_definitions import (
    ASSISTANT_TEXT,
    MODE,
    PLAN,
    THOUGHT,
    TITLE,
    USER_MESSAGE,
    default_definitions,
    default_present,
    tool_call_definition,
)


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
