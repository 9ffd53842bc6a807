"""A `task` call's child as ACP subagent updates (the unstable v1 schema's `subagent_update` and
`session_message`), for a client that advertised `clientCapabilities.subagents`.

On the parent session, the child is announced running with the prompt it was sent, then shown
idle with its stop reason after the answer it sent back. These are derived from the parent's
own log (the `tool/call` holding the prompt, `subagent/start` naming the child, the
`tool/result` holding the answer and how the child's turn ended), so the live turn and a load
show the same updates. The log keeps no subagent shape of its own.

Between the prompt and the answer, the child's own updates go out under its own session id,
its prompt shown there as the message received from the parent; a load replays the child's log
in that place the same way (`with_children`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from .acp_updates import (
    ErrorObject,
    IdleState,
    RunningState,
    SessionMessageShown,
    SessionNotification,
    SessionUpdate,
    SubagentUpdated,
    UserMessageChunk,
    user_message_id,
)
from .content import ContentBlock, DiffContent, TextContent
from .events import ToolResultData

MODEL_REQUEST_FAILED: Final = -32012
"""The JSON-RPC code of a failed model request (the server's `ModelRequestError`), which a
child's failed work reports as its error."""

CANCELLED_TEXT: Final = "cancelled"
"""The result text of a call cancelled with its turn (the loop's `CANCELLED_RESULT_TEXT`)."""


def prompt_message_id(child_id: str) -> str:
    """The id, in the parent's transcript, of the prompt the parent sent its child."""
    return f"subagent-{child_id}-prompt"


def answer_message_id(child_id: str) -> str:
    """The id, in the parent's transcript, of the answer the child sent back."""
    return f"subagent-{child_id}-answer"


def task_prompt(arguments: str) -> str | None:
    """The prompt of a `task` call's arguments (the model's JSON text), if it has one."""
    try:
        value: Any = msgspec.json.decode(arguments)
    except msgspec.DecodeError:
        return None
    prompt = value.get("prompt") if isinstance(value, dict) else None
    return prompt if isinstance(prompt, str) else None


def subagent_started(parent_id: str, child_id: str, prompt: str | None) -> list[SessionUpdate]:
    """The child announced running, then the prompt its parent sent it (the child's first
    user message, `user-0`, is that prompt's incoming view)."""
    sent = SessionMessageShown(
        prompt_message_id(child_id),
        sender_session_id=parent_id,
        recipient_session_id=child_id,
        recipient_message_id=user_message_id(0),
        content=[TextContent(prompt)] if prompt is not None else msgspec.UNSET,
    )
    return [SubagentUpdated(child_id, RunningState()), sent]


def prompt_received(
    parent_id: str, child_id: str, content: list[ContentBlock]
) -> SessionMessageShown:
    """The prompt as the child's transcript holds it, on the child's own stream: its first
    user message (`user-0`), received from the parent."""
    return SessionMessageShown(
        user_message_id(0),
        sender_session_id=parent_id,
        recipient_session_id=child_id,
        sender_message_id=prompt_message_id(child_id),
        content=content,
    )


def child_replay(
    parent_id: str, child_id: str, updates: Sequence[SessionUpdate]
) -> list[SessionUpdate]:
    """A child's own replay as its live stream showed it: the user message its parent sent
    (the `user_message_chunk`s of `user-0`) as one message received from the parent."""
    first = user_message_id(0)

    def is_prompt(update: SessionUpdate) -> bool:
        return type(update) is UserMessageChunk and update.message_id == first

    prompt = [u.content for u in updates if type(u) is UserMessageChunk and u.message_id == first]
    shown: list[SessionUpdate] = []
    received = False
    for update in updates:
        if not is_prompt(update):
            shown.append(update)
        elif not received:
            shown.append(prompt_received(parent_id, child_id, prompt))
            received = True
    return shown


def with_children(
    parent_id: str,
    updates: Sequence[SessionUpdate],
    children: Mapping[str, Sequence[SessionUpdate]],
) -> list[SessionNotification]:
    """The parent's replay, with each child's own (from `children`, by child id) in the place
    its live stream had: after the prompt the parent sent it, before its answer."""
    notifications: list[SessionNotification] = []
    for update in updates:
        notifications.append(SessionNotification(parent_id, update))
        if type(update) is SessionMessageShown and update.sender_session_id == parent_id:
            child_id = update.recipient_session_id
            if isinstance(child_id, str) and update.message_id == prompt_message_id(child_id):
                notifications.extend(
                    SessionNotification(child_id, u) for u in children.get(child_id, ())
                )
    return notifications


def subagent_finished(parent_id: str, child_id: str, result: ToolResultData) -> list[SessionUpdate]:
    """The answer the child sent back (when its turn ended with one), then the child idle,
    with the reason its work stopped: the turn's stop reason, an error, a cancel, or none when
    the process died under it (recovery closed the call; the schema's "not reported")."""
    raw = result.raw_output
    updates: list[SessionUpdate] = []
    if isinstance(raw, dict) and isinstance(raw.get("stopReason"), str):
        answer = _answer(result.content)
        if answer:
            updates.append(
                SessionMessageShown(
                    answer_message_id(child_id),
                    sender_session_id=child_id,
                    recipient_session_id=parent_id,
                    content=answer,
                )
            )
        state = IdleState(raw["stopReason"])
    elif isinstance(raw, dict) and isinstance(raw.get("error"), str):
        message = raw["error"]
        error = ErrorObject(
            MODEL_REQUEST_FAILED, f"Model request failed: {message}", {"message": message}
        )
        state = IdleState("error", error)
    elif result.content == [TextContent(CANCELLED_TEXT)]:
        state = IdleState("cancelled")
    else:
        state = IdleState()
    updates.append(SubagentUpdated(child_id, state))
    return updates


def _answer(content: list[Any]) -> list[ContentBlock]:
    """The child's answer as message content: the result's blocks, none of them empty text."""
    return [
        block
        for block in content
        if not isinstance(block, DiffContent)
        and not (type(block) is TextContent and not block.text)
    ]


__all__ = [
    "CANCELLED_TEXT",
    "MODEL_REQUEST_FAILED",
    "answer_message_id",
    "child_replay",
    "prompt_message_id",
    "prompt_received",
    "subagent_finished",
    "subagent_started",
    "task_prompt",
    "with_children",
]
