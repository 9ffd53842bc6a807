"""The checks of request params that the schema cannot make (SPEC 4): absolute paths, session
id syntax, the MCP server configs, and the `acp-server` extensions in `_meta` (a tail replay
for `session/load`, a fork point for `session/fork`). Each failure is a -32602 naming the field
as the client wrote it.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from ..agent.mcp_config import McpConfigError, McpServerConfig, parse_mcp_servers
from ..core.ids import InvalidSessionId, validate_session_id
from .errors import InvalidParams, echoed
from .protocol import (
    AcpServerForkMeta,
    AcpServerLoadMeta,
    ForkAt,
    ForkMeta,
    LoadMeta,
    ReplayOptions,
)


def check_session_id(session_id: str) -> str:
    """A session id from a request, checked before it can reach the file system."""
    try:
        return validate_session_id(session_id)
    except InvalidSessionId as exc:
        raise InvalidParams.at("$.sessionId", str(exc)) from None


def check_absolute(path: str, where: str) -> str:
    if "\x00" in path:
        raise InvalidParams.at(where, "a path cannot contain NUL characters")
    if not os.path.isabs(path):
        raise InvalidParams.at(where, f"must be an absolute path, got {echoed(path)}")
    return path


def check_mcp_servers(servers: list[Any] | UnsetType) -> list[McpServerConfig] | UnsetType:
    """The request's `mcpServers` as configs; -32602 naming the field that does not fit."""
    if isinstance(servers, UnsetType):
        return UNSET
    try:
        return parse_mcp_servers(servers)
    except McpConfigError as exc:
        raise InvalidParams.at(exc.path, exc.problem) from None


def check_directories(directories: list[str] | UnsetType) -> list[str] | UnsetType:
    if directories is not UNSET:
        for index, directory in enumerate(directories):
            check_absolute(directory, f"$.additionalDirectories[{index}]")
    return directories


def replay_limit(meta: Any) -> int | None:
    """`_meta["acp-server"].replay.maxMessages`, if the client asked for a tail replay."""
    if not isinstance(meta, dict) or "acp-server" not in meta:
        return None
    try:
        options = msgspec.convert(meta, LoadMeta)
    except msgspec.ValidationError as exc:
        raise _meta_invalid(exc) from None
    if isinstance(options.acp_server, AcpServerLoadMeta) and isinstance(
        options.acp_server.replay, ReplayOptions
    ):
        limit = options.acp_server.replay.max_messages
        return limit if isinstance(limit, int) else None
    return None


def _meta_invalid(exc: msgspec.ValidationError) -> InvalidParams:
    """-32602 for a `_meta` that does not fit, naming the field as the client wrote it."""
    # msgspec names the path inside `_meta` ("$.acp-server.replay.maxMessages").
    problem, _, inner = str(exc).rpartition(" - at `$")
    path = (
        '$._meta["acp-server"]' + inner.rstrip("`").removeprefix(".acp-server")
        if problem
        else "$._meta"
    )
    return InvalidParams.at(path, problem or str(exc))


def fork_at(meta: Any) -> ForkAt:
    """`_meta["acp-server"].forkAt` of `session/fork`: empty (the default point) if absent;
    -32602 unless it names exactly one of `seq` and `messageId`."""
    if not isinstance(meta, dict) or "acp-server" not in meta:
        return ForkAt()
    try:
        options = msgspec.convert(meta, ForkMeta)
    except msgspec.ValidationError as exc:
        raise _meta_invalid(exc) from None
    extension = options.acp_server
    if not isinstance(extension, AcpServerForkMeta) or not isinstance(extension.fork_at, ForkAt):
        return ForkAt()
    at = extension.fork_at
    if (at.seq is UNSET) == (at.message_id is UNSET):
        raise InvalidParams.at(
            '$._meta["acp-server"].forkAt', "must hold exactly one of `seq` and `messageId`"
        )
    return at
