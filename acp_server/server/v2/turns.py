"""The ACP v2 turn methods (`session/prompt` with its `messageId` receipt, `session/cancel`,
`tool_call/cancel`, `terminal/cancel`), routed on v2 connections by `install`."""

from __future__ import annotations

from .host import Agent


def install(agent: Agent) -> None:
    """Route the v2 turn methods on `agent`'s connection (none yet)."""
