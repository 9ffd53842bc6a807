"""ACP v2's `session/resume` (with `replayFrom`), routed on v2 connections by `install`."""

from __future__ import annotations

from .host import Agent


def install(agent: Agent) -> None:
    """Route v2's `session/resume` on `agent`'s connection (not yet)."""
