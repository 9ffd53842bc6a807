"""What starting the server imports: only what `initialize` and `session/new` need.

Editors spawn the agent each time a thread opens, so everything imported before the first answer
is waited for each time. Each check runs in a fresh interpreter and looks at `sys.modules`.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


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
        "jsonschema",  # jsonrpcserver's own validator, which the connection replaces
        "jsonrpcserver.main",
        "jsonrpcserver.server",  # jsonrpcserver's HTTP server
        "http.server",
        "httpx",
        "rich",
        "oslash.state",  # one of the monads oslash's __init__ imports; jsonrpcserver uses Either
        "acp_server.providers.openai",
        "acp_server.agent.loop",  # the agent loop and its tools: imported by the first prompt
        "acp_server.agent.tools",
        "mcp",  # the MCP SDK: imported when a session has MCP servers
        "acp_server.providers.base",  # every provider module: imported when one is set up
        "acp_server.providers.replay",
    ],
)
def test_importing_the_server_does_not_load(server_modules: set[str], module: str) -> None:
    assert module not in server_modules


def test_importing_the_server_loads_the_jsonrpc_dispatch_core(server_modules: set[str]) -> None:
    assert {"jsonrpcserver.dispatcher", "jsonrpcserver.result"} <= server_modules


def test_a_bare_serve_reads_the_bundled_demo_recording_when_a_session_first_goes_live() -> None:
    setup = (
        "from pathlib import Path\n"
        "from acp_server.server.app import load_provider\n"
        "from acp_server.server.config import ServeConfig\n"
        "provider = load_provider(ServeConfig(Path('unused')))"
    )
    assert "acp_server.providers.replay" not in modules_after(setup)
    bound = setup + "\nprovider.bind_session('s', parent_session_id=None, model_calls=0)"
    assert "acp_server.providers.replay" in modules_after(bound)


def test_jsonrpcserver_imported_in_full_afterwards_uses_the_same_classes() -> None:
    program = (
        "import acp_server.server.jsonrpc_core as core\n"
        "import jsonrpcserver\n"
        "from jsonrpcserver import dispatch_to_response\n"
        "print(jsonrpcserver.Success is core.Success, jsonrpcserver.Error is core.Error)"
    )
    result = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", program],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.split() == [b"True", b"True"]
