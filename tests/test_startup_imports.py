"""The import budget of start-up (`acp_server.startup`): what runs before the early answer, and
what starting the server imports, only what `initialize` and `session/new` need.

Editors spawn the agent each time a thread opens, so everything imported before the first answer
is waited for each time. Each check runs in a fresh interpreter and looks at `sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.core.content import TextContent
from acp_server.core.events import (
    AssistantMessage,
    AssistantMessageData,
    AssistantMessageEvent,
    StepData,
    StepEnd,
    StepStart,
    TurnEnd,
    TurnEndData,
    TurnEndReasonCompleted,
    TurnStart,
    TurnStartData,
    UserMessage,
    UserMessageData,
    UserMessageEvent,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.stream import AssistantBlock, AssistantText, AssistantToolCall
from acp_server.providers.bundled import DEMO_PROJECT
from acp_server.storage.jsonl.sessions import SessionStore

pytestmark = pytest.mark.process


def modules_after(statement: str) -> set[str]:
    """The modules loaded in a fresh interpreter after running `statement`."""
    program = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=60, check=True
    )
    return set(json.loads(result.stdout))


@pytest.fixture(scope="module")
def server_modules() -> set[str]:
    return modules_after("import acp_server.server.app")


@pytest.mark.parametrize(
    "module",
    [
        "httpx",
        "rich",
        "acp_server.providers.openai",
        "acp_server.agent.loop",  # the agent loop and its tools: imported by the first prompt
        "acp_server.agent.tools",
        "mcp",  # the MCP SDK: imported when a session has MCP servers
        "acp_server.providers.base",  # every provider module: imported when one is set up
        "acp_server.providers.replay",
        "zstandard",  # imported where a Zstandard log is read or written
        "websockets",  # the WebSocket transport: imported by `serve --listen` alone
        "acp_server.server.listen",
    ],
)
def test_importing_the_server_does_not_load(server_modules: set[str], module: str) -> None:
    assert module not in server_modules


@pytest.mark.parametrize("module", ["acp_server.storage.jsonl.index", "zstandard"])
def test_opening_a_sessions_directory_does_not_load(module: str) -> None:
    opened = (
        "import tempfile\n"
        "from acp_server.storage.url import open_store, store_url_for_dir\n"
        "from pathlib import Path\n"
        "open_store(store_url_for_dir(Path(tempfile.mkdtemp())))"
    )
    assert module not in modules_after(opened)


def test_the_modules_a_serve_imports_before_its_first_answers_define_no_dataclass() -> None:
    # A dataclass compiles its methods with `exec` as its class is made, about 0.7 ms each:
    # the types of these modules are msgspec Structs or plain classes instead.
    program = (
        "import dataclasses, json, sys, tempfile\n"
        "from pathlib import Path\n"
        "import acp_server.cli.main, acp_server.cli.serve, acp_server.server.app\n"
        "from acp_server.storage.url import open_store, store_url_for_dir\n"
        "open_store(store_url_for_dir(Path(tempfile.mkdtemp())))\n"
        "print(json.dumps(sorted(\n"
        "    f'{name}.{value.__qualname__}'\n"
        "    for name, module in list(sys.modules.items()) if name.startswith('acp_server')\n"
        "    for value in vars(module).values()\n"
        "    if isinstance(value, type) and value.__module__ == name\n"
        "    and dataclasses.is_dataclass(value)\n"
        ")))"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, timeout=60, check=True
    )
    assert json.loads(result.stdout) == []


def test_importing_the_server_loads_jsonrpcserver_through_its_package(
    server_modules: set[str],
) -> None:
    assert {"jsonrpcserver", "jsonrpcserver.dispatcher"} <= server_modules


def test_a_bare_serve_reads_the_demo_recording_at_the_first_model_call(tmp_path: Path) -> None:
    for name, content in DEMO_PROJECT.items():
        (tmp_path / name).write_bytes(content)
    setup = (
        "from pathlib import Path\n"
        "from acp_server.providers.base import BoundSession, ModelRequest\n"
        "from acp_server.server.app import load_provider\n"
        "from acp_server.server.config import ServeConfig\n"
        "provider = load_provider(ServeConfig(Path('unused')))\n"
        f"provider.bind_session(BoundSession(session_id='s', cwd={str(tmp_path)!r}))\n"
    )
    called = setup + (
        "import anyio\n"
        "async def first_call() -> None:\n"
        "    request = ModelRequest(session_id='s', messages=[], tools=[])\n"
        "    async for _ in provider.stream(request):\n"
        "        pass\n"
        "anyio.run(first_call)\n"
    )
    assert "acp_server.providers.replay" not in modules_after(setup)
    assert "acp_server.providers.replay" in modules_after(called)


def _log_of_one_turn(root: Path, blocks: list[AssistantBlock]) -> None:
    """A session `s` of one completed turn whose assistant message holds `blocks`."""
    writer = SessionStore(root).create(
        SessionHeader(version=SESSION_FORMAT_VERSION, id="s", created_at=0, cwd=str(root))
    )
    writer.append(
        [
            TurnStart(0, 0, TurnStartData(0)),
            UserMessageEvent(1, 0, UserMessageData(0, UserMessage("u", [TextContent("hi")]))),
            StepStart(2, 0, StepData(0, 0)),
            AssistantMessageEvent(3, 0, AssistantMessageData(0, 0, AssistantMessage("a", blocks))),
            StepEnd(4, 0, StepData(0, 0)),
            TurnEnd(5, 0, TurnEndData(0, TurnEndReasonCompleted())),
        ]
    )
    writer.close()


def modules_imported_by_a_load(root: Path) -> set[str]:
    """The modules a fresh `serve` imports to answer `session/load` of session `s`, then exit."""
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/load",
            "params": {"sessionId": "s", "cwd": str(root), "mcpServers": []},
        },
    ]
    server = subprocess.Popen(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "acp_server",
            "serve",
            "--sessions-dir",
            str(root),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    server.stdin.flush()
    while json.loads(server.stdout.readline()).get("id") != 2:
        pass
    # Everything imported up to the answer is on stderr before it; communicate() closes stdin,
    # which ends the server.
    _, stderr = server.communicate(timeout=60)
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.decode().splitlines()
        if line.startswith("import time:") and "|" in line
    }


def test_loading_a_session_without_tool_calls_does_not_import_the_tools(tmp_path: Path) -> None:
    _log_of_one_turn(tmp_path, [AssistantText("hello")])
    assert "acp_server.agent.tools" not in modules_imported_by_a_load(tmp_path)


def test_loading_a_session_with_a_tool_call_imports_the_tools_to_present_it(
    tmp_path: Path,
) -> None:
    _log_of_one_turn(tmp_path, [AssistantToolCall("c", "read", '{"path": "x"}')])
    assert "acp_server.agent.tools" in modules_imported_by_a_load(tmp_path)


STARTED = (
    "import acp_server.startup.launch\n"
    "from acp_server.startup import handshake\n"
    "from acp_server.transports import stdio_fds"
)
"""What the launcher imports to start the early answer: itself, the answer, the streams."""


@pytest.mark.parametrize("module", ["msgspec", "anyio", "asyncio", "argparse", "acp_server.cli"])
def test_the_early_handshake_starts_before_the_servers_libraries(module: str) -> None:
    assert module not in modules_after(STARTED)


def test_the_launchers_choice_imports_a_few_leaf_modules_of_the_package() -> None:
    # Whether to start the early answer depends on the providers' key variables, named by a leaf
    # module that imports nothing (the registry, built on it, imports msgspec), and on the
    # store, looked at by a module of the standard library alone.
    chosen = (
        STARTED + "\nacp_server.startup.launch.serves_stdio_early([], {})"
        "\nacp_server.startup.launch.store_ready_early([], {})"
    )
    loaded = {name for name in modules_after(chosen) if name.startswith("acp_server")}
    assert loaded <= {
        "acp_server",
        "acp_server.startup",
        "acp_server.startup.launch",
        "acp_server.startup.handshake",
        "acp_server.startup.store_location",
        "acp_server.transports",
        "acp_server.transports.stdio_fds",
        "acp_server.providers",
        "acp_server.providers.names",
    }


@pytest.mark.parametrize("module", ["msgspec", "anyio", "asyncio", "platformdirs"])
def test_the_launchers_choice_imports_none_of_the_servers_libraries(module: str) -> None:
    chosen = (
        STARTED + "\nacp_server.startup.launch.serves_stdio_early([], {})"
        "\nacp_server.startup.launch.store_ready_early([], {})"
    )
    assert module not in modules_after(chosen)


def test_the_registry_names_the_providers_of_the_launchers_table() -> None:
    from acp_server.providers.names import KEY_VARIABLES
    from acp_server.providers.registry import PROVIDERS

    assert list(PROVIDERS) == list(KEY_VARIABLES)
