"""What `/help` and `/mcp` answer (SPEC 4.4, 4.5): pure text from the command list and from the
MCP servers' states."""

from __future__ import annotations

from acp_server.core.acp_updates import AvailableCommand, CommandInput
from acp_server.core.commands import COMMANDS, help_text, parse_command
from acp_server.core.content import TextContent
from acp_server.core.mcp_status import McpServerStatus, mcp_text


def test_help_gives_one_line_per_command_with_its_input_hint() -> None:
    commands = [
        AvailableCommand("title", "Set the session's title", CommandInput("title")),
        AvailableCommand("stats", "Show the session log's figures"),
    ]
    assert help_text(commands) == (
        "Commands:\n"
        "/title <title>: Set the session's title\n"
        "/stats: Show the session log's figures\n"
        "Any other /word is sent to the model as text."
    )


def test_help_lists_every_command_the_server_offers_in_order() -> None:
    lines = help_text().splitlines()
    assert [line.split(":")[0].split(" ")[0] for line in lines[1:-1]] == [
        f"/{command.name}" for command in COMMANDS
    ]


def test_help_and_mcp_are_commands() -> None:
    assert [parse_command([TextContent(text)]) is not None for text in ("/help", "/mcp")] == [
        True,
        True,
    ]


def test_mcp_says_when_the_session_has_no_servers() -> None:
    assert mcp_text([]) == "No MCP servers: the client configured none for this session."


def test_mcp_names_each_server_its_transport_state_and_tools() -> None:
    servers = [
        McpServerStatus("demo", "stdio", "connected", ("echo", "pid")),
        McpServerStatus("one", "http", "connected", ("ping",)),
        McpServerStatus("empty", "sse", "connected"),
        McpServerStatus("slow", "stdio", "connecting"),
        McpServerStatus("broken", "stdio", "failed", reason="it did not connect within 10 s"),
        McpServerStatus("gone", "stdio", "disconnected", reason="EOF"),
    ]
    assert mcp_text(servers) == (
        "MCP servers (6):\n"
        "- demo (stdio): connected; 2 tools: echo, pid\n"
        "- one (http): connected; 1 tool: ping\n"
        "- empty (sse): connected; no tools\n"
        "- slow (stdio): connecting\n"
        "- broken (stdio): failed: it did not connect within 10 s\n"
        "- gone (stdio): disconnected: EOF"
    )
