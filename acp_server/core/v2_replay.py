"""ACP v2's `session/resume` replay, its pure parts: the request's `replayFrom` cursor,
the page cuts of a replay read in pages, and the load projection's chunks folded into the
whole messages v2 replays.

v2 replays each message whole (`user_message`, `agent_message`, `agent_thought` with their
content), never as chunks; everything else (tool calls, plans, titles, compactions) as the v1
load projection (`core.projection.project_load`) shows it. The replay is read page by page,
each page cut at a turn's start, so that a tool call and its result, a message and its chunks,
are projected together.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, TypeVar

import msgspec
from msgspec import UNSET

from .acp_updates import (
    AgentMessageChunk,
    AgentMessageShown,
    AgentThoughtChunk,
    AgentThoughtShown,
    SessionUpdate,
    UserMessageChunk,
    UserMessageShown,
)
from .content import ContentBlock
from .events import (
    TurnEnd,
    TurnEndReasonCancelled,
    TurnEndReasonCompleted,
    TurnEndReasonMaxSteps,
    TurnEndReasonMaxTokens,
    TurnEndReasonRefusal,
    TurnStart,
)

AFTER_MESSAGE: Final = "_after_message"
"""Our cursor (v2 reserves `_`-prefixed types for an implementation's own): replay every
message after the one it names by `messageId`."""


class FromStart(msgspec.Struct, frozen=True):
    """Replay the whole history."""


class AfterMessage(msgspec.Struct, frozen=True):
    """Replay what follows the message `message_id` (the position just after it)."""

    message_id: str


Cursor = FromStart | AfterMessage


class CursorError(ValueError):
    """A `replayFrom` the agent refuses (-32602): `path` names the field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


def replay_cursor(value: Any) -> Cursor | None:
    """The cursor of `replayFrom` (plain JSON): None when it is absent or null (nothing is
    replayed). An unsupported type is refused, never replaced by another cursor (the schema's
    MUST)."""
    if value is UNSET or value is None:
        return None
    if not isinstance(value, dict):
        raise CursorError("$.replayFrom", "replayFrom must be an object with a `type`")
    kind = value.get("type")
    if not isinstance(kind, str):
        raise CursorError("$.replayFrom.type", "replayFrom.type must be a string")
    if kind == "start":
        return FromStart()
    if kind == AFTER_MESSAGE:
        message_id = value.get("messageId")
        if not isinstance(message_id, str) or not message_id:
            raise CursorError(
                "$.replayFrom.messageId",
                f"a {AFTER_MESSAGE} cursor needs a messageId (a non-empty string)",
            )
        return AfterMessage(message_id)
    raise CursorError(
        "$.replayFrom.type",
        f"unsupported replay cursor type {kind[:80]!r}; this agent replays from "
        f'"start" or "{AFTER_MESSAGE}"',
    )


R = TypeVar("R")


def turn_cut(records: Sequence[R]) -> int:
    """Where a page of `records` (read in seq order) is cut: before the last `turn/start`
    after its first record. What comes before holds whole turns (and whatever precedes the
    first turn) and is projected now; the rest is carried into the next page. 0 when there is
    no such `turn/start`: the whole page is one turn, still going on."""
    for index in range(len(records) - 1, 0, -1):
        if type(records[index]) is TurnStart:
            return index
    return 0


_WHOLE: Final[dict[type, type]] = {
    UserMessageChunk: UserMessageShown,
    AgentMessageChunk: AgentMessageShown,
    AgentThoughtChunk: AgentThoughtShown,
}

Chunk = UserMessageChunk | AgentMessageChunk | AgentThoughtChunk


def whole_messages(updates: Iterable[SessionUpdate]) -> list[SessionUpdate]:
    """`updates` (a load projection) with each message's chunks folded into one whole
    message, where its first chunk was: the chunks of one message are consecutive in a
    projection (a step's thoughts and text, then its tool calls), so each run of chunks is
    grouped by kind and message id. Every other update is kept as it is."""
    folded: list[SessionUpdate] = []
    run: dict[tuple[type, str], list[ContentBlock]] = {}

    def end_run() -> None:
        for (kind, message_id), content in run.items():
            folded.append(_WHOLE[kind](message_id=message_id, content=content))
        run.clear()

    for update in updates:
        kind = type(update)
        if kind in _WHOLE:
            chunk: Chunk = update  # type: ignore[assignment]
            if isinstance(chunk.message_id, str):
                run.setdefault((kind, chunk.message_id), []).append(chunk.content)
                continue
        end_run()
        folded.append(update)
    end_run()
    return folded


def message_id_of(update: SessionUpdate) -> str | None:
    """The message `update` shows, if it shows one."""
    message_id = getattr(update, "message_id", None)
    return message_id if isinstance(message_id, str) else None


def after_message(updates: Sequence[SessionUpdate], message_id: str) -> int | None:
    """The index just after the last update of message `message_id` in `updates`, or None
    when none shows it."""
    for index in range(len(updates) - 1, -1, -1):
        if message_id_of(updates[index]) == message_id:
            return index + 1
    return None


_STOP_REASONS: Final[dict[type, str]] = {
    TurnEndReasonCompleted: "end_turn",
    TurnEndReasonCancelled: "cancelled",
    TurnEndReasonMaxTokens: "max_tokens",
    TurnEndReasonRefusal: "refusal",
    TurnEndReasonMaxSteps: "max_turn_requests",
}


def last_stop_reason(records: Iterable[object], before: str | None) -> str | None:
    """The stop reason of the last turn that ended in `records`, else `before` (that of the
    pages read before them). A turn that ended in an error or was interrupted has none: v2's
    stop reasons have no value for it that every reader takes."""
    reason = before
    for record in records:
        if type(record) is TurnEnd:
            reason = _STOP_REASONS.get(type(record.data.reason))
    return reason
