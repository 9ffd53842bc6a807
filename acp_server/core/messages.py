"""Provider history: `derive_messages(events)` builds the next model request's conversation.

Only three event types carry conversation state: `user/message`, `assistant/message` and
`tool/result` (and `context/compaction` says where it restarts, `session/rewind` which turns
are left out). Chunks are a rendering and test artifact and are ignored here, so a failed
stream (chunks without a message) adds nothing, and an interrupted message contributes only
the text and reasoning it received, which keeps the history valid for the next request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final, Literal

from msgspec import UNSET, UnsetType

from .compaction import latest_compaction, summary_message, summary_text
from .content import ContentBlock, TextContent, ToolResultContent
from .events import (
    AssistantMessageEvent,
    CommandResult,
    SessionEvent,
    ToolResult,
    ToolResultData,
    UserMessageEvent,
)
from .rewind import live_events
from .stream import AssistantBlock, AssistantToolCall
from .structs import Model, Tagged


class UserTurn(Tagged, tag="user", tag_field="role"):
    content: list[ContentBlock]


class AssistantTurn(Tagged, tag="assistant", tag_field="role"):
    content: list[AssistantBlock]


class ToolTurn(Tagged, tag="tool", tag_field="role"):
    call_id: str
    content: list[ToolResultContent]
    is_error: Literal[True] | UnsetType = UNSET


ModelMessage = UserTurn | AssistantTurn | ToolTurn
"""One entry of the provider history, tagged by `role`."""


class ToolDefinition(Model):
    """A tool as the model sees it: name, description and a JSON Schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


UNANSWERED_CALL_TEXT: Final = "no result: the turn ended before this tool call finished"
"""The result a tool call gets in the history when its turn ended without one (a crash, or a
model that called tools but finished with `stop`): providers refuse an unanswered call."""


def derive_messages(events: Iterable[SessionEvent]) -> list[ModelMessage]:
    """The provider history of a session, in log order.

    From the latest `context/compaction` on, when there is one (SPEC 1.2): its summary as one
    user message, then the messages after its `throughSeq`, the summarising step's own message
    not repeated.

    Every assistant message's tool calls are followed by their results, in call order: a call
    without one gets an error result saying so, and a result without its call is left out, so
    the history is one a provider accepts whatever the log went through. An assistant message
    with no content (a stream cancelled before anything arrived) is left out: providers reject
    empty assistant turns, and it carried nothing the model must see. So is a command's turn
    (SPEC 4.4): its user message ran `/title` or `/stats`, not the model. So is every turn a
    `session/rewind` rewound (`core.rewind.live_events`), a compaction in one included.
    """
    events = live_events(events)
    history: list[ModelMessage] = []
    skipped: tuple[int, int] | None = None
    compaction = latest_compaction(events)
    if compaction is not None:
        marker = compaction.data
        skipped = (marker.turn, marker.step)
        events = [e for e in events if e.seq > marker.through_seq]
        summary = next(
            (
                summary_text(e)
                for e in events
                if type(e) is AssistantMessageEvent and (e.data.turn, e.data.step) == skipped
            ),
            "",
        )
        history.append(UserTurn([summary_message(summary)]))
    commands = {e.data.turn for e in events if type(e) is CommandResult}
    results = {
        (e.data.turn, e.data.step, e.data.call_id): e.data
        for e in events
        if type(e) is ToolResult and e.data.turn not in commands
    }
    for event in events:
        if type(event) is UserMessageEvent:
            if event.data.turn not in commands:
                history.append(UserTurn(list(event.data.message.content)))
        elif type(event) is AssistantMessageEvent:
            d = event.data
            if not d.message.content or d.turn in commands or (d.turn, d.step) == skipped:
                continue
            _add_assistant(history, d.turn, d.step, d.message.content, results)
    return history


def _add_assistant(
    history: list[ModelMessage],
    turn: int,
    step: int,
    content: list[AssistantBlock],
    results: dict[tuple[int, int, str], ToolResultData],
) -> None:
    calls: list[str] = []
    for block in content:
        if type(block) is AssistantToolCall and block.id not in calls:
            calls.append(block.id)
    last = history[-1] if history else None
    if type(last) is AssistantTurn:
        # Two assistant turns in a row (the first with no calls, so no results between them):
        # one turn, as providers that require alternating roles take it.
        history[-1] = AssistantTurn([*last.content, *content])
    else:
        history.append(AssistantTurn(list(content)))
    for call_id in calls:
        result = results.get((turn, step, call_id))
        if result is None:
            history.append(ToolTurn(call_id, [TextContent(UNANSWERED_CALL_TEXT)], True))
        else:
            history.append(ToolTurn(call_id, list(result.content), result.is_error))
