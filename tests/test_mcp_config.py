"""Reading a client's `mcpServers` (ACP `McpServer`) and what the log may keep of each."""

from __future__ import annotations

import pytest

from acp_server.agent.mcp_config import McpConfigError, parse_mcp_servers, public_url
from acp_server.core.header import McpServerRecord


def test_a_stdio_server_keeps_its_env_for_connecting_and_records_only_its_command() -> None:
    [config] = parse_mcp_servers(
        [{"name": "fs", "command": "/bin/fs", "args": ["-v"], "env": [{"name": "T", "value": "s"}]}]
    )
    assert (config.command, config.args, config.env) == ("/bin/fs", ("-v",), {"T": "s"})
    assert config.record() == McpServerRecord("fs", "stdio", command="/bin/fs")
    assert "'s'" not in repr(config)


def test_an_http_server_records_its_url_without_credentials_query_or_fragment() -> None:
    [config] = parse_mcp_servers(
        [
            {
                "type": "sse",
                "name": "web",
                "url": "https://me:pw@example.com:8443/mcp?token=x#y",
                "headers": [{"name": "Authorization", "value": "Bearer z"}],
            }
        ]
    )
    assert config.headers == {"Authorization": "Bearer z"}
    assert config.record() == McpServerRecord("web", "sse", url="https://example.com:8443/mcp")
    assert "Bearer z" not in repr(config)


def test_a_stdio_server_without_args_or_env_has_none() -> None:
    [config] = parse_mcp_servers([{"name": "a", "command": "a"}])
    assert (config.args, config.env) == ((), {})


@pytest.mark.parametrize(
    ("entry", "path", "problem"),
    [
        ({"name": "a"}, "$.mcpServers[0]", "Object missing required field `command`"),
        ({"name": "a", "command": 3}, "$.mcpServers[0].command", "Expected `str`, got `int`"),
        ({"type": "http", "name": "a"}, "$.mcpServers[0]", "Object missing required field `url`"),
        (
            {"type": "ws", "name": "a", "command": "a"},
            "$.mcpServers[0].type",
            "Invalid enum value 'ws'",
        ),
        ({"name": "", "command": "a"}, "$.mcpServers[0].name", "an MCP server needs a name"),
        ("a", "$.mcpServers[0]", "Expected `object`, got `str`"),
    ],
)
def test_an_entry_that_does_not_fit_names_its_field(entry: object, path: str, problem: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        parse_mcp_servers([entry])
    assert (caught.value.path, caught.value.problem) == (path, problem)


def test_public_url_of_an_ipv6_address_keeps_its_brackets() -> None:
    assert public_url("http://[::1]:9/x?q") == "http://[::1]:9/x"
