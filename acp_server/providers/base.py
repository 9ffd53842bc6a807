"""The provider interface: one model request in, an async stream of `StreamChunk`s out.

A provider is cancellable by the usual anyio means: the loop runs `stream()` inside a cancel
scope, and cancelling it stops the stream at the next await.

The generic seam is `Provider` alone. A provider that keeps state per session (llm-replay's
script cursors) also implements `SessionBinding`, and the server tells it when a session goes
live; the live providers are stateless and do not. A provider that sends an API key is a
`KeyHolder`: the loop scrubs that key from every tool result before it is logged or sent, with
every other key the server holds (`HeldSecrets`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import msgspec

from ..core.content import TextContent
from ..core.messages import AssistantTurn, ModelMessage, ToolDefinition, ToolTurn, UserTurn
from ..core.stream import AssistantReasoning, AssistantText, StreamChunk

if TYPE_CHECKING:
    # Re-exported: the agent names the key's type from here, its one provider module.
    from .secret import Secret as Secret


class RetryReport(msgspec.Struct, frozen=True, kw_only=True):
    """An attempt of a model request failed before its first chunk and will be tried again:
    what the provider tells whoever asked (the loop shows it as a notice)."""

    message: str
    """What failed, as the provider's messages say it (no key in it)."""
    status: int | str | None
    """The HTTP status of the answer, or a word for a failure without one (`timeout`)."""
    attempt: int
    """The attempt about to be made: 2 for the first retry."""
    attempts: int
    """The most attempts the request may take."""
    delay: float
    """Seconds waited before that attempt."""


RetryListener = Callable[[RetryReport], Awaitable[None]]


class ModelRequest(msgspec.Struct, kw_only=True):
    session_id: str
    messages: list[ModelMessage]
    tools: list[ToolDefinition]
    system: str | None = None
    """The system prompt, sent in the provider's own place for it; None: no system prompt."""
    max_tokens: int | None = None
    """The most output tokens the answer may take; None: the provider's default."""
    model: str | None = None
    """The session's chosen model (SPEC 4.4); None: the provider's own."""
    reasoning_effort: str | None = None
    """`low`, `medium` or `high` for a provider that takes it; None: its default."""
    on_retry: RetryListener | None = None
    """Told of each retry of this request before its delay is waited; a provider that never
    retries never calls it."""


class ProviderError(Exception):
    """A model request failed; ends the turn with `turn/end {kind: "error"}`."""

    def __init__(self, message: str, code: int | str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class Provider(Protocol):
    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamChunk]:
        """Stream the model's answer to `request`, chunk by chunk, as it arrives."""


class BoundSession(msgspec.Struct, frozen=True, kw_only=True):
    """A session that went live, as a `SessionBinding` provider is told of it."""

    session_id: str
    parent_session_id: str | None = None
    """The parent of a subagent's child session; None for a top-level session."""
    model_calls: int = 0
    """The model calls its log already holds: 0 for a new session, more after a load."""
    cwd: str | None = None


@runtime_checkable
class SessionBinding(Protocol):
    """A provider that wants to know each session that goes live (llm-replay)."""

    def bind_session(self, session: BoundSession) -> None:
        """Called when a session goes live: new or continued after a load."""


@runtime_checkable
class KeyHolder(Protocol):
    """A provider that holds an API key: from its variable, or given later by `authenticate`
    from the stored credentials (so it is read at each use, never copied)."""

    api_key: Secret | None


HeldSecrets = Callable[[], Awaitable[tuple["Secret", ...]]]
"""Every other key a tool's output could show, as they are now (`providers.held_keys`: the
stored ones, any left in a provider's key variable): the loop scrubs them with the
`KeyHolder`'s own."""


def request_text(messages: list[ModelMessage]) -> str:
    """All the text of a request's messages, one message a line, in order."""
    parts: list[str] = []
    for message in messages:
        if isinstance(message, (UserTurn, ToolTurn)):
            parts.extend(b.text for b in message.content if isinstance(b, TextContent))
        elif isinstance(message, AssistantTurn):
            parts.extend(
                b.text
                for b in message.content
                if isinstance(b, (AssistantText, AssistantReasoning))
            )
    return "\n".join(parts)
