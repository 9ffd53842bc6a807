"""Tools under each mode (SPEC 4.4): whether a write or a command asks, goes ahead, or is
refused, with the client's requests recorded exactly."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from acp_server.agent.ports import ClientCapabilities
from acp_server.agent.tools import BUILTIN_TOOLS, ToolContext, ToolOutcome, run_tool
from acp_server.core.content import TextContent


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Client:
    """Answers every permission request with `allow_once`, and records what it was asked."""

    capabilities = ClientCapabilities()

    def __init__(self) -> None:
        self.methods: list[str] = []

    async def request(self, method: str, params: Any) -> Any:
        self.methods.append(method)
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    async def notify(self, method: str, params: Any) -> None:
        raise AssertionError("tools send no notifications")


async def noop(content: object = None) -> None:
    pass


async def call(ctx: ToolContext, name: str, args: dict[str, Any]) -> ToolOutcome:
    tool = BUILTIN_TOOLS.get(name)
    assert tool is not None
    return await run_tool(
        BUILTIN_TOOLS,
        ctx,
        "call-1",
        name,
        json.dumps(args),
        title=name,
        kind=tool.kind,
        on_started=noop,
    )


def context(tmp_path: Path, mode: str | list[str], client: Client) -> ToolContext:
    """A session's tool context in `mode` (a one-item list: the mode as it is now)."""
    current = mode if isinstance(mode, list) else [mode]
    return ToolContext("s", tmp_path.resolve(), [], client, mode=lambda: current[0])


WRITE = ("write_file", {"path": "a.txt", "content": "new\n"})
EDIT = ("edit_file", {"path": "a.txt", "oldText": "old", "newText": "new"})
COMMAND = ("run_command", {"command": sys.executable, "args": ["-c", "print(1)"]})
PROCESS = pytest.mark.process  # run_command starts a program


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("mode", "tool", "asked"),
    [
        ("default", WRITE, ["session/request_permission"]),
        ("default", EDIT, ["session/request_permission"]),
        pytest.param("default", COMMAND, ["session/request_permission"], marks=PROCESS),
        ("accept-edits", WRITE, []),
        ("accept-edits", EDIT, []),
        pytest.param("accept-edits", COMMAND, ["session/request_permission"], marks=PROCESS),
        ("full-access", WRITE, []),
        ("full-access", EDIT, []),
        pytest.param("full-access", COMMAND, [], marks=PROCESS),
    ],
)
async def test_a_tool_asks_only_when_the_mode_says_so(
    tmp_path: Path, mode: str, tool: tuple[str, dict[str, Any]], asked: list[str]
) -> None:
    (tmp_path / "a.txt").write_text("old\n")
    client = Client()
    outcome = await call(context(tmp_path, mode, client), *tool)
    assert client.methods == asked
    assert outcome.is_error is False


@pytest.mark.anyio
@pytest.mark.parametrize("tool", [WRITE, EDIT, COMMAND])
async def test_plan_mode_refuses_without_asking(
    tmp_path: Path, tool: tuple[str, dict[str, Any]]
) -> None:
    (tmp_path / "b.txt").write_text("old\n")
    tool = (tool[0], {**tool[1], "path": "b.txt"}) if "path" in tool[1] else tool
    client = Client()
    outcome = await call(context(tmp_path, "plan", client), *tool)
    assert client.methods == []
    assert outcome.is_error is True
    assert outcome.content == [
        TextContent(
            f"{tool[0]} was not run: the session is in plan mode, in which writes, edits and "
            "commands are refused. Describe the change instead; the user can switch modes to "
            "make it."
        )
    ]
    assert (tmp_path / "b.txt").read_text() == "old\n"


@pytest.mark.anyio
async def test_plan_mode_refuses_a_tool_the_user_always_allowed(tmp_path: Path) -> None:
    client = Client()
    ctx = context(tmp_path, "plan", client)
    ctx.allowed_always.add("write_file")
    outcome = await call(ctx, *WRITE)
    assert (client.methods, outcome.is_error) == ([], True)


@pytest.mark.anyio
async def test_accept_edits_still_refuses_a_write_outside_the_session(tmp_path: Path) -> None:
    client = Client()
    outcome = await call(
        context(tmp_path, "accept-edits", client),
        "write_file",
        {"path": str(tmp_path.parent / "elsewhere.txt"), "content": "x"},
    )
    assert (client.methods, outcome.is_error) == ([], True)
    assert not (tmp_path.parent / "elsewhere.txt").exists()


@pytest.mark.anyio
async def test_the_mode_is_read_at_each_call(tmp_path: Path) -> None:
    client = Client()
    modes = ["full-access"]
    ctx = context(tmp_path, modes, client)
    await call(ctx, *WRITE)
    modes[0] = "default"
    await call(ctx, *WRITE)
    assert client.methods == ["session/request_permission"]
