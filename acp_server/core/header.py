"""The session log header (SPEC 2.2, 2.3): immutable session metadata on a log's first line."""

from __future__ import annotations

from typing import Final, Literal

from msgspec import UNSET, UnsetType

from .structs import Model, SafeInt, Tagged

SESSION_FORMAT_VERSION: Final = 2
"""Bumped whenever what an existing record means changes (pre-release: no compatibility)."""

McpTransport = Literal["stdio", "http", "sse"]


class McpServerRecord(Model, forbid_unknown_fields=False):
    """What the log keeps of one MCP server the client configured (SPEC 4.5): enough to say
    which server it was, nothing it was given to authenticate with (no `env` values, no
    header values, no arguments). Unknown keys are dropped rather than refused, so a header
    written before this record existed still loads, and is written back without them."""

    name: str
    transport: McpTransport
    command: str | UnsetType = UNSET
    """A stdio server's program."""
    url: str | UnsetType = UNSET
    """An http or sse server's address, without credentials, query or fragment."""


class SessionHeader(Tagged, tag="session"):
    version: int
    id: str
    created_at: SafeInt
    cwd: str
    parent_session: str | UnsetType = UNSET
    origin: Literal["subagent"] | UnsetType = UNSET
    additional_directories: list[str] | UnsetType = UNSET
    mcp_servers: list[McpServerRecord] | UnsetType = UNSET
    """The MCP servers the client passed to `session/new`, without their secrets."""
