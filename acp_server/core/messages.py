"""Provider history: `derive_messages(events)` builds the next model request's conversation.

Only three event types carry conversation state: `user/message`, `assistant/message` and
`tool/result`. Chunks are a rendering and test artifact and are ignored here, so a failed
stream (chunks without a message) adds nothing, and an interrupted message contributes only
the text and reasoning it received, which keeps the history valid for the next request.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from msgspec import UNSET, UnsetType

from .events import (
    AssistantBlock,
    AssistantMessageEvent,
    CommandResult,
    ContentBlock,
    Model,
    SessionEvent,
    Tagged,
    ToolResult,
    ToolResultContent,
    UserMessageEvent,
)


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


def derive_messages(events: Iterable[SessionEvent]) -> list[ModelMessage]:
    """The provider history of a session, in log order.

    An assistant message with no content (a stream cancelled before anything arrived) is left
    out: providers reject empty assistant turns, and it carried nothing the model must see. So
    is a command's turn (SPEC 4.4): its user message ran `/title` or `/stats`, not the model.
    """
    events = list(events)
    commands = {e.data.turn for e in events if type(e) is CommandResult}
    history: list[ModelMessage] = []
    for event in events:
        if type(event) is UserMessageEvent:
            if event.data.turn not in commands:
                history.append(UserTurn(list(event.data.message.content)))
        elif type(event) is AssistantMessageEvent:
            content = event.data.message.content
            if content:
                history.append(AssistantTurn(list(content)))
        elif type(event) is ToolResult:
            d = event.data
            history.append(ToolTurn(d.call_id, list(d.content), d.is_error))
    return history
