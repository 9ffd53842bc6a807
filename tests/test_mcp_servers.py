"""A session's MCP servers in process (`acp_server.agent.tools.mcp`): the names their tools
get, what the model is told about them, and redaction of their secrets."""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp_support import DEMO

from acp_server.agent.mcp_config import McpServerConfig
from acp_server.agent.tools.mcp import McpServers, redact, tool_name


def test_a_tool_name_is_prefixed_with_its_server_and_made_safe() -> None:
    assert tool_name("my server", "read.file", set()) == "mcp__my_server__read_file"


def test_a_tool_name_is_at_most_64_characters() -> None:
    name = tool_name("s" * 40, "t" * 40, set())
    assert (len(name), name) == (64, "mcp__" + "s" * 40 + "__" + "t" * 17)


def test_a_tool_name_already_taken_gets_a_number() -> None:
    taken = {"mcp__a__b", "mcp__a__b_2"}
    assert tool_name("a", "b", taken) == "mcp__a__b_3"
    long = tool_name("s" * 40, "t" * 40, set())
    assert tool_name("s" * 40, "t" * 40, {long}) == long[:62] + "_2"


def test_redact_removes_env_and_header_values_and_url_credentials() -> None:
    config = McpServerConfig(
        "x",
        "http",
        url="http://me:pw-12345@host/mcp?k=v",
        headers={"Authorization": "Bearer abcdefgh12345"},
        env={"T": "env-secret"},
    )
    message = "401 for http://me:pw-12345@host/mcp?k=v with abcdefgh12345 and env-secret"
    assert redact(config, message) == "401 for http://host/mcp with <redacted> and <redacted>"


@pytest.mark.process
@pytest.mark.anyio
async def test_the_tools_of_a_server_are_offered_with_their_descriptions_and_schemas() -> None:
    config = McpServerConfig("demo", "stdio", command=sys.executable, args=(str(DEMO), "stdio"))
    servers = McpServers([config], cwd="/", connect_timeout=120)
    async with anyio.create_task_group() as group:
        await group.start(servers.run)
        try:
            await servers.wait_settled()
            tools = {tool.name: tool for tool in servers.tools}
        finally:
            await servers.aclose()
    assert servers.failures == []
    assert sorted(tools) == [
        "mcp__demo__die",
        "mcp__demo__echo",
        "mcp__demo__env_set",
        "mcp__demo__fail",
        "mcp__demo__greet",
        "mcp__demo__hang",
        "mcp__demo__kinds",
        "mcp__demo__pid",
        "mcp__demo__repeat",
    ]
    echo = tools["mcp__demo__echo"]
    assert (echo.description, echo.kind) == ("Say the text back, prefixed with `echo: `.", "other")
    assert echo.parameters == {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
        "title": "echoArguments",
    }
    assert echo.present({"text": "x"}).title == "demo: echo"
