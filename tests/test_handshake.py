"""The `initialize` answered while the server starts (`acp_server.startup.handshake`): it answers
exactly what the connection would, or leaves the line to the connection; and
`acp_server.startup.launch` starts it only for the stdio server."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
from pathlib import Path
from typing import Any, cast

import msgspec
import pytest
from acp_process import AcpProcess
from hypothesis import given
from hypothesis import strategies as st

from acp_server.cli.parser import build_parser, with_default_command
from acp_server.providers.credentials import KeyName
from acp_server.providers.names import takes_a_key
from acp_server.providers.registry import REPLAY
from acp_server.server.agent import AcpAgent
from acp_server.server.app import provider_auth
from acp_server.server.auth import KeyAuth, NoAuth
from acp_server.server.config import ServeConfig
from acp_server.server.protocol import InitializeRequest
from acp_server.server.rpc import Connection, result_frame
from acp_server.server.sessions import SessionRegistry
from acp_server.startup.handshake import early_answer
from acp_server.startup.launch import early_provider, serves_stdio_early
from acp_server.storage.jsonl.store import JsonlStore


class _Sink:
    async def send(self, frame: bytes) -> None:
        raise AssertionError("nothing is sent")

    def send_nowait(self, frame: bytes) -> None:
        raise AssertionError("nothing is sent")


class _Keyless:
    """A provider with no `api_key` yet, for `KeyAuth`."""

    api_key = None


def connection_answer(request_id: Any, params: Any, *, key_needed: bool = False) -> Any:
    """What the connection's own `initialize` answers, as JSON, for a provider that needs a key
    (a remote endpoint) or takes none (llm-replay)."""
    auth = KeyAuth(_Keyless(), KeyName("openai"), key_required=True) if key_needed else NoAuth()
    agent = AcpAgent(
        Connection(_Sink()),
        SessionRegistry(JsonlStore(Path("/nonexistent"))),
        cast(Any, None),
        auth=auth,
    )
    request = msgspec.convert({} if params is None else params, InitializeRequest)
    return json.loads(result_frame(request_id, agent.initialize(request)))


def line(params: Any, request_id: Any = 1, **extra: Any) -> bytes:
    message = {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}
    return json.dumps({**message, **extra}).encode()


def answered(raw: bytes, *, key_needed: bool = False) -> Any:
    decided = early_answer(raw, key_needed=key_needed)
    assert decided is not None
    frame, _ = decided
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    return json.loads(frame)


@pytest.mark.parametrize(
    "params",
    [
        {"protocolVersion": 1},
        {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}},
        {"protocolVersion": 0, "clientCapabilities": {"fs": {"readTextFile": True}}},
        {"protocolVersion": 1, "clientInfo": {"name": "zed", "version": "1"}},
        {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": "yes"}}},
        {"protocolVersion": 1, "clientCapabilities": {"fs": 1, "auth": {"terminal": True}}},
        {"protocolVersion": 1, "clientCapabilities": None, "_meta": None},
        {"protocolVersion": 1, "clientCapabilities": [], "unknown": 5, "_meta": {"x": 1}},
    ],
)
@pytest.mark.parametrize("key_needed", [False, True])
def test_the_early_answer_is_the_connections(params: dict[str, Any], key_needed: bool) -> None:
    assert answered(line(params, "req-7"), key_needed=key_needed) == connection_answer(
        "req-7", params, key_needed=key_needed
    )


@pytest.mark.parametrize("version", [2, 65535])
def test_an_initialize_for_version_2_or_later_is_left_to_the_connection(version: int) -> None:
    params = {"protocolVersion": version, "info": {"name": "zed", "version": "1"}}
    assert early_answer(line(params), key_needed=False) is None


def test_a_client_that_can_run_a_terminal_is_offered_the_terminal_method() -> None:
    params = {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}
    methods = answered(line(params), key_needed=True)["result"]["authMethods"]
    assert [m["id"] for m in methods] == ["agent", "terminal"]


def test_a_provider_that_takes_no_key_lists_no_auth_method() -> None:
    params = {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}
    assert answered(line(params), key_needed=False)["result"]["authMethods"] == []


def test_malformed_capabilities_count_as_none() -> None:
    params = {
        "protocolVersion": 1,
        "clientCapabilities": {"terminal": 1, "auth": {"terminal": True}},
    }
    methods = answered(line(params), key_needed=True)["result"]["authMethods"]
    assert [m["id"] for m in methods] == ["agent"]


def test_the_params_answered_are_handed_over() -> None:
    params = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}}
    decided = early_answer(line(params), key_needed=False)
    assert decided is not None and decided[1] == params


@pytest.mark.parametrize(
    "raw",
    [
        line({"protocolVersion": 1}, request_id=None),
        line({"protocolVersion": 1}, request_id=1.0),
        line({"protocolVersion": 1}, request_id=True),
        line({"protocolVersion": 1}, request_id=2**64),
        line({"protocolVersion": True}),
        line({"protocolVersion": 1.0}),
        line({"protocolVersion": 65536}),
        line({"protocolVersion": -1}),
        line({}),
        line(None),
        line([1]),
        line({"protocolVersion": 1, "_meta": []}),
        line({"protocolVersion": 1}, extra="field"),
        b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"protocolVersion":1}}',
        b'{"jsonrpc":"1.0","id":1,"method":"initialize","params":{"protocolVersion":1}}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"protocolVersion":2}}',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"x":NaN}}',
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{"protocolVersion":1}}',
        b'{"jsonrpc":"2.0","id":"\xff","method":"initialize","params":{"protocolVersion":1}}',
        b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]',
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}',
        b"",
        line({"protocolVersion": 1, "clientInfo": "x" * 70_000}),
    ],
)
def test_what_it_is_not_sure_of_is_left_to_the_connection(raw: bytes) -> None:
    assert early_answer(raw, key_needed=False) is None


JSON = st.recursive(
    # Text without escapes (the handshake leaves `\u` escapes to the connection).
    st.none() | st.booleans() | st.integers(-3, 3) | st.text('ab "\\/{}', max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                ["fs", "auth", "terminal", "readTextFile", "writeTextFile", "_meta", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@given(capabilities=JSON, info=JSON, key_needed=st.booleans())
def test_any_capabilities_get_the_connections_answer(
    capabilities: Any, info: Any, key_needed: bool
) -> None:
    params = {"protocolVersion": 1, "clientCapabilities": capabilities, "clientInfo": info}
    assert answered(line(params), key_needed=key_needed) == connection_answer(
        1, params, key_needed=key_needed
    )


@pytest.mark.parametrize(
    ("args", "early"),
    [
        ([], True),
        (["serve"], True),
        (["--sessions-dir", "/tmp/s"], True),
        (["serve", "--provider", "llm-replay"], True),
        (["serve", "--provider=llm-replay"], True),
        (["serve", "--provider", "openai", "--model", "m"], False),
        (["--provider=anthropic"], False),
        (["serve", "--prov", "openai"], False),
        (["serve", "--listen", "127.0.0.1:0"], False),
        (["serve", "--lis=:0"], False),
        (["serve", "--help"], False),
        (["-h"], False),
        (["--version"], False),
        (["demo"], False),
        (["log", "stats", "x"], False),
    ],
)
def test_launch_starts_the_handshake_for_the_stdio_server_alone(
    args: list[str], early: bool
) -> None:
    assert serves_stdio_early(args, {}) is early


COMMAND_LINE = build_parser()


def serves_stdio_with_replay(args: list[str]) -> bool | None:
    """What the command line makes of `args`: whether it serves stdio with llm-replay (False for
    help, the version, and the Unix socket server); None when argparse refuses it."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            parsed = COMMAND_LINE.parse_args(with_default_command(args))
    except SystemExit as exc:
        return False if exc.code == 0 else None
    return (
        parsed.command == "serve"
        and parsed.listen is None
        and parsed.socket is None
        and parsed.provider == REPLAY
    )


def every_abbreviated_flag() -> list[list[str]]:
    """Each flag of the top level and of `serve`, abbreviated as far as argparse allows and
    written whole, with a value when it takes one (both providers for `--provider`)."""
    (commands,) = (
        action for action in COMMAND_LINE._actions if isinstance(action, argparse._SubParsersAction)
    )
    values = {"listen": ["127.0.0.1:0"], "provider": [REPLAY, "openai"]}
    lines = []
    for parser in (COMMAND_LINE, commands.choices["serve"]):
        for action in parser._actions:
            for flag in action.option_strings:
                for value in values.get(action.dest, ["1"]) if action.nargs != 0 else [None]:
                    for end in range(3, len(flag) + 1):
                        written = [] if value is None else [value]
                        lines.append(["serve", flag[:end], *written])
                        lines.append([f"{flag[:end]}={value}"] if value else [flag[:end]])
    return lines


def test_launch_reads_every_abbreviated_flag_as_the_command_line_does() -> None:
    # The launcher decides before argparse is imported, so it matches prefixes itself: here
    # its reading is held to argparse's, for every flag that argparse accepts.
    checked = 0
    for args in every_abbreviated_flag():
        expected = serves_stdio_with_replay(args)
        if expected is not None:
            assert serves_stdio_early(args, {}) is expected, args
            checked += 1
    assert checked > 100


def test_the_launcher_answers_early_for_a_provider_the_server_finds_keyless_too() -> None:
    # The early answer lists the auth methods the launcher's reading implies; the server's own
    # answer lists those its `Auth` implies: the two readings of one command line agree.
    provider = early_provider(["serve", "--provider", REPLAY], {})
    assert provider == REPLAY
    config = ServeConfig(sessions_dir=Path("/nonexistent"), provider=provider)
    assert (takes_a_key(provider), provider_auth(config, cast(Any, None)).requires_key()) == (
        False,
        False,
    )


def test_the_terminal_auth_method_logs_in_instead() -> None:
    assert serves_stdio_early([], {"ACP_SERVER_LOGIN": "1"}) is False


@pytest.mark.process
def test_a_server_answers_initialize_while_it_starts(tmp_path: Path) -> None:
    with AcpProcess(tmp_path / "sessions", "--log-level", "info") as server:
        assert server.initialize()["protocolVersion"] == 1
        server.result("session/list", {})
        assert server.finish() == 0
    assert "initialize answered while the server started" in server.stderr


@pytest.mark.process
def test_a_first_line_it_leaves_is_answered_by_the_connection(tmp_path: Path) -> None:
    with AcpProcess(tmp_path / "sessions", "--log-level", "info") as server:
        server.send(b'{"jsonrpc":"2.0","id":1,')
        assert server.read_frame()["error"]["code"] == -32700
        assert server.initialize()["protocolVersion"] == 1
        assert server.finish() == 0
    assert "initialize answered while the server started" not in server.stderr


def test_the_answer_carries_the_agents_version() -> None:
    import acp_server

    info = answered(line({"protocolVersion": 1}))["result"]["agentInfo"]
    assert info == {"name": "acp-server", "version": acp_server.__version__}
    assert msgspec.json.decode(msgspec.json.encode(info)) == info
