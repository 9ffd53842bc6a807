"""The MCP servers a client configures for a session (ACP `McpServer`, SPEC 4.5), as values.

`parse_mcp_servers` reads the `mcpServers` of `session/new`, `session/load` and
`session/resume`; each `McpServerConfig` holds what connecting needs, secrets included (a
stdio server's `env` values, an http server's header values), and `record()` gives what the
session log may keep of it: its name, transport and command or URL, nothing more. The secrets
are left out of `repr`, so a config logged by mistake does not print them.

Nothing here imports the MCP SDK: sessions without MCP servers never load it.
"""

from __future__ import annotations

from typing import Any, Final, Literal
from urllib.parse import urlsplit, urlunsplit

import msgspec
from msgspec import Struct

from ..core.header import McpServerRecord, McpTransport

DEFAULT_CONNECT_TIMEOUT: Final = 10.0
"""Seconds a session's servers get to connect before it goes on without them."""
DEFAULT_CALL_TIMEOUT: Final = 60.0
"""Seconds an MCP tool call may take before it is an error result."""


class McpConfigError(ValueError):
    """An `mcpServers` entry that does not fit ACP's `McpServer`; `path` names the field."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{problem} - at `{path}`")
        self.path = path
        self.problem = problem


class McpServerConfig(Struct, frozen=True):
    """One MCP server of a session, ready to connect."""

    name: str
    transport: McpTransport
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = msgspec.field(default_factory=dict)
    """Extra environment of a stdio server: often API tokens, so never logged or recorded."""
    url: str = ""
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    """Headers of an http or sse server: often credentials, so never logged or recorded."""

    def __repr__(self) -> str:
        # Only what the log may keep: env, header values, arguments and the URL's credentials
        # stay out of anything a repr reaches (a traceback, a log line).
        shown = f"name={self.name!r}, transport={self.transport!r}, address={self.address!r}"
        return f"McpServerConfig({shown})"

    def record(self) -> McpServerRecord:
        """What the session log keeps of this server (SPEC 4.5)."""
        if self.transport == "stdio":
            return McpServerRecord(self.name, self.transport, command=self.command)
        return McpServerRecord(self.name, self.transport, url=public_url(self.url))

    @property
    def address(self) -> str:
        """The command or URL, for messages (no secrets)."""
        return self.command if self.transport == "stdio" else public_url(self.url)


def public_url(url: str) -> str:
    """`url` without user info, query or fragment: the parts that may carry a credential."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparsable URL>"
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


class _NameValue(Struct, forbid_unknown_fields=False):
    name: str
    value: str


class _Stdio(Struct, forbid_unknown_fields=False):
    name: str
    command: str
    # Required by the schema; clients that leave them out mean "none".
    args: list[str] = []
    env: list[_NameValue] = []
    type: Literal["stdio"] = "stdio"


class _Http(Struct, forbid_unknown_fields=False):
    type: Literal["http", "sse"]
    name: str
    url: str
    headers: list[_NameValue] = []


def parse_mcp_servers(raw: list[Any], where: str = "$.mcpServers") -> list[McpServerConfig]:
    """The configs of `raw` (the request's `mcpServers`); `McpConfigError` names a bad field."""
    configs: list[McpServerConfig] = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        if not isinstance(item, dict):
            raise McpConfigError(at, f"Expected `object`, got `{type(item).__name__}`")
        kind = item.get("type", "stdio")
        try:
            if kind in ("http", "sse"):
                http = msgspec.convert(item, _Http)
                configs.append(
                    McpServerConfig(
                        http.name,
                        http.type,
                        url=http.url,
                        headers={h.name: h.value for h in http.headers},
                    )
                )
            else:
                stdio = msgspec.convert(item, _Stdio)
                configs.append(
                    McpServerConfig(
                        stdio.name,
                        "stdio",
                        command=stdio.command,
                        args=tuple(stdio.args),
                        env={e.name: e.value for e in stdio.env},
                    )
                )
        except msgspec.ValidationError as exc:
            problem, _, inner = str(exc).rpartition(" - at `$")
            if not problem:
                raise McpConfigError(at, str(exc)) from None
            raise McpConfigError(at + inner.rstrip("`"), problem) from None
        if not configs[-1].name:
            raise McpConfigError(f"{at}.name", "an MCP server needs a name")
    return configs
