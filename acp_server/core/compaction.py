"""Compaction (SPEC 4.6) without I/O: what the summarising call is asked, what the provider
history says in the summary's place, and when a session is due for one.

Compaction is an event, not a rewrite: the log keeps every event, and `context/compaction`
only tells `derive_messages` where the provider history may restart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from .content import TextContent
from .events import AssistantMessageEvent, ContextCompaction, SessionEvent
from .stream import AssistantText

DEFAULT_COMPACT_AT: Final = 0.8
"""The share of the context window the last usage may reach before the loop compacts."""

SUMMARY_SYSTEM: Final = (
    "You summarise a conversation between a user and a coding assistant so that the assistant "
    "can continue the work from the summary alone. Keep the user's requests and constraints, "
    "decisions made, files read or changed and what was found in them, commands run and their "
    "outcomes, errors met, and the work still in progress or left to do. Be concise but leave "
    "out nothing the assistant will need. Answer with the summary only."
)
"""The system instruction of the summarising call."""

SUMMARY_REQUEST: Final = "Summarise the conversation so far, as the system instruction says."

SUMMARY_PREAMBLE: Final = (
    "The earlier conversation was compacted. This is a summary of it; the search_history "
    "tool finds details it leaves out.\n\n"
)
"""How the user message standing for the summarised history begins (SPEC 1.2)."""

COMPACTED_NOTICE: Final = "The conversation was compacted. Summary:\n\n"
"""How the load replay marks a compaction (SPEC 4.6), before the summary."""


def summary_request(instructions: str) -> str:
    """The last user message of the summarising call, with the user's `/compact` text."""
    if not instructions:
        return SUMMARY_REQUEST
    return f"{SUMMARY_REQUEST}\n\nThe user's instructions for the summary: {instructions}"


def summary_text(message: AssistantMessageEvent) -> str:
    """The summary a compaction step's message holds: its text blocks."""
    return "".join(b.text for b in message.data.message.content if type(b) is AssistantText)


def summary_message(summary: str) -> TextContent:
    """The content of the user message that stands for the compacted history."""
    return TextContent(SUMMARY_PREAMBLE + summary)


def latest_compaction(events: Sequence[SessionEvent]) -> ContextCompaction | None:
    for event in reversed(events):
        if type(event) is ContextCompaction:
            return event
    return None


def due(events: Sequence[SessionEvent], limit: int | None) -> bool:
    """Whether the next model call should compact first: the latest usage (not that of a
    summarising call, whose input was the history being replaced) reached `limit` tokens,
    and no compaction came after it."""
    if limit is None:
        return False
    for event in reversed(events):
        if type(event) is ContextCompaction:
            return False  # it follows its summarising message, whose usage does not count
        if type(event) is AssistantMessageEvent and event.data.usage:
            usage = event.data.usage
            return usage.input_tokens + usage.output_tokens >= limit
    return False


def compact_limit(context_window: int | None, compact_at: float) -> int | None:
    """The token count at which a session compacts; None when the window is unknown."""
    if context_window is None or compact_at <= 0:
        return None
    return int(context_window * compact_at)
