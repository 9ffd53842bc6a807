"""The session log header (SPEC 2.2, 2.3): immutable session metadata on a log's first line."""

from __future__ import annotations

from typing import Any, Final, Literal

from msgspec import UNSET, UnsetType

from .events import SafeInt, Tagged

SESSION_FORMAT_VERSION: Final = 2
"""Bumped whenever what an existing record means changes (pre-release: no compatibility)."""


class SessionHeader(Tagged, tag="session"):
    version: int
    id: str
    created_at: SafeInt
    cwd: str
    parent_session: str | UnsetType = UNSET
    origin: Literal["subagent"] | UnsetType = UNSET
    additional_directories: list[str] | UnsetType = UNSET
    mcp_servers: list[Any] | UnsetType = UNSET
    """The `mcpServers` the client passed to `session/new`, recorded as given."""
