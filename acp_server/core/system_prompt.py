"""The system prompt of a session's model requests, from its `session/context` events (SPEC 1.2).

A client may give a session its own system prompt (ACP `systemPrompt` on `session/new`,
`session/load`, `session/resume`, `session/fork`): `append` adds it after the server's own,
`override` replaces the server's own. The log keeps it as a `session/context` event, so a load
restores it (and a fork copies it with the prefix); the latest such event holds from its place
on. The same event keeps the inputs of the server's own prompt (the project instruction files
read, the settings that shaped it); each kind of change keeps what the other set.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from msgspec import UNSET
from msgspec.structs import replace

from .content import ContentBlock, TextContent
from .events import (
    InstructionFile,
    PromptSettings,
    SessionContext,
    SessionContextData,
    SessionEvent,
    SystemPromptMode,
)


def latest_context(events: Iterable[SessionEvent]) -> SessionContextData | None:
    """The data of the last `session/context` event of `events`; None when there is none."""
    latest: SessionContextData | None = None
    for event in events:
        if type(event) is SessionContext:
            latest = event.data
    return latest


def client_prompt_text(content: Sequence[ContentBlock]) -> str:
    """The text of the client's system prompt: its text blocks, one after the other, a blank
    line between them."""
    return "\n\n".join(block.text for block in content if isinstance(block, TextContent))


def compose_system(default: str | None, context: SessionContextData | None) -> str | None:
    """The system prompt of a model request: the server's `default` (None or empty: none) with
    the client's prompt of `context` appended to it or in its place."""
    if context is None or context.system_prompt is UNSET or context.system_prompt_mode is UNSET:
        return default
    client = client_prompt_text(context.system_prompt)
    if context.system_prompt_mode == "override" or not default:
        return client
    return f"{default}\n\n{client}"


def context_change(
    current: SessionContextData | None, mode: SystemPromptMode, content: Sequence[ContentBlock]
) -> SessionContextData | None:
    """The `session/context` data that gives a log whose latest one is `current` the client's
    prompt (`mode`, `content`), keeping the server prompt's inputs `current` names; None when
    `current` holds that prompt already (a client reloading its session, or forking it with the
    prompt the copied prefix holds): nothing new to log."""
    if (
        current is not None
        and current.system_prompt_mode == mode
        and current.system_prompt == list(content)
    ):
        return None
    if current is None:
        return SessionContextData([], mode, list(content))
    return replace(current, system_prompt_mode=mode, system_prompt=list(content))


def inputs_change(
    current: SessionContextData | None,
    instructions: Sequence[InstructionFile],
    settings: PromptSettings,
) -> SessionContextData | None:
    """The `session/context` data that gives a log whose latest one is `current` the server
    prompt's inputs read now (the instruction files, the settings), keeping the client's
    prompt `current` holds; None when `current` holds those inputs already: nothing new to
    log."""
    if (
        current is not None
        and current.instructions == list(instructions)
        and current.settings == settings
    ):
        return None
    if current is None:
        return SessionContextData(list(instructions), settings=settings)
    return replace(current, instructions=list(instructions), settings=settings)
