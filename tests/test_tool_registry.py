"""The tool registry: each tool registered once with its schema, kind, title and runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from acp_server.agent.tools import (
    BUILTIN_TOOLS,
    Tool,
    ToolContext,
    ToolOutcome,
    ToolRegistry,
    run_tool,
)
from acp_server.agent.tools.base import ToolCallInfo
from acp_server.core.acp_updates import ToolPresentation
from acp_server.core.content import TextContent


async def _echo(ctx: ToolContext, call: ToolCallInfo, args: Any, on_started: Any) -> ToolOutcome:
    await on_started()
    return ToolOutcome([TextContent(f"{call.name} {call.title} {args}")], False)


ECHO = Tool(
    "echo",
    "Says its arguments back.",
    {"type": "object"},
    "fetch",
    _echo,
    msgspec.json.decode,
    title=lambda args: f"Echo {args.get('text')}" if isinstance(args, dict) else None,
)


class NoClient:
    capabilities: Any = None

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError(method)

    async def notify(self, method: str, params: Any) -> None:
        raise AssertionError(method)


def test_a_registered_tool_is_offered_after_the_builtin_ones() -> None:
    registry = BUILTIN_TOOLS.extended([ECHO])
    assert registry.names == [
        "read_file",
        "write_file",
        "run_command",
        "todo_write",
        "task",
        "edit_file",
        "list_directory",
        "glob",
        "grep",
        "search_history",
        "echo",
    ]
    assert registry.definitions[-1].name == "echo"
    assert registry.definitions[-1].parameters == {"type": "object"}


def test_a_registered_tool_is_presented_with_its_own_kind_and_title() -> None:
    registry = ToolRegistry([ECHO])
    assert registry.present("echo", {"text": "hi"}) == ToolPresentation("Echo hi", "fetch")
    assert registry.present("echo", "not json") == ToolPresentation("echo", "fetch")


def test_an_unregistered_tool_is_presented_by_its_name_as_other() -> None:
    assert ToolRegistry([ECHO]).present("read_file", {"path": "a"}) == ToolPresentation(
        "read_file", "other"
    )


def test_a_name_registered_twice_is_refused() -> None:
    with pytest.raises(ValueError, match="registered twice"):
        ToolRegistry([ECHO, ECHO])


@pytest.mark.anyio
async def test_run_tool_runs_the_registered_runner_with_decoded_arguments(tmp_path: Path) -> None:
    started: list[bool] = []

    async def on_started() -> None:
        started.append(True)

    outcome = await run_tool(
        ToolRegistry([ECHO]),
        ToolContext("s", tmp_path, [], NoClient()),
        "c1",
        "echo",
        '{"text": "hi"}',
        title="Echo hi",
        kind="fetch",
        on_started=on_started,
    )
    assert (outcome, started) == (
        ToolOutcome([TextContent("echo Echo hi {'text': 'hi'}")], False),
        [True],
    )


@pytest.mark.anyio
async def test_an_unknown_tool_names_the_tools_of_the_registry(tmp_path: Path) -> None:
    async def on_started() -> None:
        raise AssertionError("not started")

    outcome = await run_tool(
        ToolRegistry([ECHO]),
        ToolContext("s", tmp_path, [], NoClient()),
        "c1",
        "read_file",
        "{}",
        title="read_file",
        kind="other",
        on_started=on_started,
    )
    assert outcome == ToolOutcome(
        [TextContent("unknown tool 'read_file'; the tools are: echo")], True
    )
