"""The client's system prompt of a session (ACP `systemPrompt`, SPEC 1.2 `session/context`).

`session/new`, `session/load`, `session/resume` and `session/fork` may carry a `systemPrompt`:
`append` (after the server's own system prompt) or `override` (instead of it), text content only.
It is checked before anything changes (a refused one creates, loads, resumes or forks nothing),
kept in the log as a `session/context` event when it differs from what the log holds (a fork's:
what its copied prefix holds), and read from the log by every model request of the session
(`system_for`). A load, resume or fork without one keeps what the log holds: the client's
instructions stay with the session.
"""

from __future__ import annotations

from typing import Final, get_args

from msgspec import UNSET, UnsetType

from ..core.content import TextContent
from ..core.events import SessionContext, SessionContextData, SystemPromptMode
from ..core.system_prompt import compose_system, context_change, latest_context
from .errors import InvalidParams
from .live import LiveSession
from .protocol import SystemPrompt

MODES: Final[tuple[str, ...]] = get_args(SystemPromptMode)


def check_system_prompt(value: SystemPrompt | UnsetType | None) -> SystemPrompt | None:
    """The request's `systemPrompt` when it is one the server applies; None when it has none;
    -32602 naming the field otherwise (an unknown mode is refused, never taken for another)."""
    if value is UNSET or value is None:
        return None
    if value.mode not in MODES:
        raise InvalidParams.at(
            "$.systemPrompt.mode",
            f"unknown system prompt mode {value.mode!r}; the modes are: {', '.join(MODES)}",
        )
    if not value.content:
        raise InvalidParams.at("$.systemPrompt.content", "must hold at least one content block")
    for index, block in enumerate(value.content):
        if not isinstance(block, TextContent):
            raise InvalidParams.at(
                f"$.systemPrompt.content[{index}]",
                f"a system prompt takes text blocks only, not {block.__struct_config__.tag}",
            )
    return value


def session_context(session: LiveSession) -> SessionContextData | None:
    """The session's latest `session/context` data, folded from its log once and then kept."""
    if session.context is UNSET:
        session.context = latest_context(session.log.plain_events())
    return session.context


def forget_context(session: LiveSession) -> None:
    """The session's events were re-read (a load, a resume): fold them again when asked."""
    session.context = UNSET


async def apply_system_prompt(session: LiveSession, prompt: SystemPrompt | None) -> None:
    """Log the client's `prompt` as a `session/context` event, unless the log already holds it
    as the latest one; the project instruction files the log names stay as they are."""
    forget_context(session)
    if prompt is None:
        return
    mode: SystemPromptMode = "append" if prompt.mode == "append" else "override"
    data = context_change(session_context(session), mode, prompt.content)
    if data is None:
        return  # the same instructions again: nothing new
    with session.activity():
        session.recorder.append(SessionContext, data)
        session.context = data
        await session.recorder.sync()


def system_for(session: LiveSession, default: str | None) -> str | None:
    """The system prompt of the session's next model request, over the server's `default`."""
    return compose_system(default, session_context(session))
