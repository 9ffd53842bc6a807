"""ACP v2 through the real `acp-server serve`: `initialize` for version 2, the v2 method set
(auth, new, list, close, delete, set_config_option and the unstable session methods), the
history API on a v2 connection, JSON-RPC batches and the envelope's hygiene, with the probes of
the conformance kit's v2 suite. Every v2 result is held to the SDK's v2 schema."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from sdk_schema import check_v2

import acp_server

pytestmark = pytest.mark.process

INFO = {"name": "acp-tck", "version": "0.0.0"}
KEY_ENV = "OPENAI_API_KEY"
REMOTE = ("--provider", "openai", "--model", "gpt-4o", "--base-url", "https://api.invalid/v1")

EXPECTED_INITIALIZE_V2 = {
    "protocolVersion": 2,
    "info": {"name": "acp-server", "version": acp_server.__version__},
    "capabilities": {
        "session": {
            "prompt": {"image": {}, "audio": {}, "embeddedContext": {}},
            "mcp": {"stdio": {}, "http": {}},
            "delete": {},
            "additionalDirectories": {},
            "systemPrompt": {"mode": {"override": {}}},
            "fork": {},
            "archive": {},
            "status": {},
            "title": {},
        },
        "_meta": {
            "acp-server": {
                "history": {
                    "page": "session.page",
                    "follow": "session.follow",
                    "search": "session.search",
                },
                "sessionList": {"follow": "session.list.follow"},
            }
        },
    },
    "authMethods": [],
}
AGENT_METHOD = {
    "type": "agent",
    "methodId": "agent",
    "name": "API key",
    "description": "The key from the provider's environment variable (OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY unless --api-key-env says otherwise), or the one `acp-server login` "
    "stored for that provider",
}
TERMINAL_METHOD = {
    "type": "terminal",
    "methodId": "terminal",
    "name": "Log in in a terminal",
    "description": "Runs `acp-server login`: type the API key (it is not shown); it is stored "
    "for this provider, readable by you alone",
    "env": [{"name": "ACP_SERVER_LOGIN", "value": "1"}],
}
COMMAND_NAMES = ["mode", "model", "title", "stats", "compact", "init", "rewind", "mcp", "help"]


def initialize_v2(server: AcpProcess, capabilities: Any = None, version: int = 2) -> Any:
    params: dict[str, Any] = {"protocolVersion": version, "info": INFO}
    params["capabilities"] = {} if capabilities is None else capabilities
    result = server.result("initialize", params)
    check_v2("InitializeResponse", result)
    return result


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcpProcess]:
    """One v2 connection for the tests that only see their own sessions (each in a directory
    of its own)."""
    with AcpProcess(tmp_path_factory.mktemp("v2") / "sessions") as process:
        initialize_v2(process)
        yield process


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AcpProcess]:
    """A fresh process, not yet initialized."""
    with AcpProcess(tmp_path / "sessions") as process:
        yield process


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[AcpProcess]:
    """A server whose provider needs a key it does not have (so it lists auth methods)."""
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    env["ACP_SERVER_CONFIG_DIR"] = str(tmp_path / "config")
    with AcpProcess(tmp_path / "sessions", *REMOTE, env=env) as process:
        yield process


def new_session(server: AcpProcess, cwd: Path, **params: Any) -> Any:
    result = server.result("session/new", {"cwd": str(cwd), **params})
    check_v2("NewSessionResponse", result)
    return result


def assert_single_line_error(frame: dict[str, Any], code: int) -> None:
    assert set(frame) == {"jsonrpc", "id", "error"}
    assert frame["error"]["code"] == code
    message = frame["error"]["message"]
    assert isinstance(message, str) and message and "\n" not in message


# ---------------------------------------------------------------------------------------------
# initialize.


def test_initialize_for_version_2_answers_v2s_result(server: AcpProcess) -> None:
    assert initialize_v2(server) == EXPECTED_INITIALIZE_V2


def test_initialize_for_a_version_beyond_2_answers_2(server: AcpProcess) -> None:
    assert initialize_v2(server, version=65535)["protocolVersion"] == 2


def test_the_capabilities_are_object_markers_under_the_schemas_root_keys(
    server: AcpProcess,
) -> None:
    capabilities = initialize_v2(server)["capabilities"]
    # The kit's EXT-202: extensions go under `_meta`; its INIT-204: no boolean markers.
    assert set(capabilities) <= {"session", "auth", "providers", "nes", "positionEncoding", "_meta"}

    def markers(value: dict[str, Any]) -> Iterator[Any]:
        for key, inner in value.items():
            if key != "_meta":
                yield inner
                if isinstance(inner, dict):
                    yield from markers(inner)

    assert all(isinstance(marker, dict) for marker in markers(capabilities))


def test_an_initialize_for_1_after_one_for_2_speaks_v1_again(server: AcpProcess) -> None:
    initialize_v2(server)
    assert server.result("initialize", {"protocolVersion": 1})["protocolVersion"] == 1
    assert server.error("auth/login", {"methodId": "agent"})["code"] == -32601
    assert server.result("logout") == {}


def test_a_provider_needing_a_key_lists_the_agent_method_alone_to_a_client_without_terminal(
    keyed: AcpProcess,
) -> None:
    assert initialize_v2(keyed)["authMethods"] == [AGENT_METHOD]


def test_a_client_advertising_the_terminal_marker_is_offered_the_terminal_method(
    keyed: AcpProcess,
) -> None:
    methods = initialize_v2(keyed, {"auth": {"terminal": {}}})["authMethods"]
    assert methods == [AGENT_METHOD, TERMINAL_METHOD]


@pytest.mark.parametrize(
    "capabilities",
    [{"auth": {"terminal": True}}, {"auth": {"terminal": None}}, {"auth": 1}, "nonsense"],
)
def test_a_terminal_marker_that_is_no_object_offers_no_terminal_method(
    keyed: AcpProcess, capabilities: Any
) -> None:
    assert initialize_v2(keyed, capabilities)["authMethods"] == [AGENT_METHOD]


def test_a_client_without_capabilities_or_info_is_still_answered(server: AcpProcess) -> None:
    result = server.result("initialize", {"protocolVersion": 2})
    assert result == EXPECTED_INITIALIZE_V2


# ---------------------------------------------------------------------------------------------
# auth/login and auth/logout.


def test_auth_login_without_a_key_is_auth_required(keyed: AcpProcess) -> None:
    initialize_v2(keyed)
    error = keyed.error("auth/login", {"methodId": "agent"})
    assert error["code"] == -32000


def test_auth_login_with_an_unadvertised_method_names_the_field(keyed: AcpProcess) -> None:
    initialize_v2(keyed)
    error = keyed.error("auth/login", {"methodId": "terminal"})
    assert error == {
        "code": -32602,
        "message": "Invalid params: 'terminal' is not a method for auth/login; it is 'agent' "
        "(the terminal method runs `acp-server login` instead) - at `$.methodId`",
        "data": {"path": "$.methodId"},
    }


def test_auth_logout_answers_an_empty_result(keyed: AcpProcess) -> None:
    initialize_v2(keyed)
    result = keyed.result("auth/logout", {})
    check_v2("LogoutAuthResponse", result)
    assert result == {}


def test_session_new_without_a_key_is_auth_required(keyed: AcpProcess, tmp_path: Path) -> None:
    initialize_v2(keyed)
    assert keyed.error("session/new", {"cwd": str(tmp_path)})["code"] == -32000


# ---------------------------------------------------------------------------------------------
# session/new and session/fork.


def test_session_new_answers_config_options_and_commands_in_v2s_shape(
    shared: AcpProcess, tmp_path: Path
) -> None:
    result = new_session(shared, tmp_path)
    assert set(result) == {"sessionId", "configOptions", "availableCommands"}
    assert [option["configId"] for option in result["configOptions"]] == ["mode", "model"]
    mode = result["configOptions"][0]
    assert (mode["type"], mode["currentValue"], mode["category"]) == ("select", "default", "mode")
    assert [command["name"] for command in result["availableCommands"]] == COMMAND_NAMES
    assert {command["type"] for command in result["availableCommands"]} == {"command"}


def test_a_v2_client_is_not_sent_the_commands_again_after_session_new(
    shared: AcpProcess, tmp_path: Path
) -> None:
    shared.keep_setup_updates = True
    try:
        new_session(shared, tmp_path)
        answer, before = shared.exchange("session/list", {"cwd": str(tmp_path)})
    finally:
        shared.keep_setup_updates = False
    assert "result" in answer
    assert before == []


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"mcpServers": []},
        {"additionalDirectories": ["EXTRA"]},
        {"_meta": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
        {"mcpServers": [{"type": "stdio", "name": "s", "command": "/bin/nonexistent", "args": []}]},
        {"mcpServers": [{"type": "http", "name": "h", "url": "http://127.0.0.1:1/nonexistent"}]},
    ],
    ids=["cwd-only", "no-mcp-servers", "additional-directories", "meta", "mcp-stdio", "mcp-http"],
)
def test_session_new_takes_the_kits_params(
    shared: AcpProcess, tmp_path: Path, params: dict[str, Any]
) -> None:
    (tmp_path / "extra").mkdir()
    if "additionalDirectories" in params:
        params = {"additionalDirectories": [str(tmp_path / "extra")]}
    session_id = new_session(shared, tmp_path, **params)["sessionId"]
    if params.get("mcpServers"):
        # The server that cannot start is told of, in v2's shape, once it has settled.
        frame = shared.read_frame()
        check_v2("UpdateSessionNotification", frame["params"])
        assert (frame["params"]["sessionId"], frame["params"]["update"]["sessionUpdate"]) == (
            session_id,
            "notice",
        )


def test_two_new_sessions_have_different_ids(shared: AcpProcess, tmp_path: Path) -> None:
    assert new_session(shared, tmp_path)["sessionId"] != new_session(shared, tmp_path)["sessionId"]


def test_session_fork_answers_v2s_shape(shared: AcpProcess, tmp_path: Path) -> None:
    parent = new_session(shared, tmp_path)["sessionId"]
    result = shared.result("session/fork", {"sessionId": parent, "cwd": str(tmp_path)})
    check_v2("ForkSessionResponse", result)
    assert result["sessionId"] != parent
    assert [option["configId"] for option in result["configOptions"]] == ["mode", "model"]
    assert [command["name"] for command in result["availableCommands"]] == COMMAND_NAMES


# ---------------------------------------------------------------------------------------------
# session/list, close, delete.


def test_session_list_without_params_lists_sessions(shared: AcpProcess, tmp_path: Path) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    result = shared.result("session/list")
    check_v2("ListSessionsResponse", result)
    assert session_id in [session["sessionId"] for session in result["sessions"]]
    assert all(os.path.isabs(session["cwd"]) for session in result["sessions"])


def test_session_list_by_cwd_lists_the_sessions_of_that_very_string(
    shared: AcpProcess, tmp_path: Path
) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    (tmp_path / "inner").mkdir()
    new_session(shared, tmp_path / "inner")
    result = shared.result("session/list", {"cwd": str(tmp_path)})
    check_v2("ListSessionsResponse", result)
    assert [(s["sessionId"], s["cwd"]) for s in result["sessions"]] == [(session_id, str(tmp_path))]


def test_session_list_for_a_directory_without_sessions_is_empty(
    shared: AcpProcess, tmp_path: Path
) -> None:
    result = shared.result("session/list", {"cwd": str(tmp_path / "no-session-here")})
    assert result == {"sessions": []}


def test_session_close_of_an_idle_session_answers_an_empty_result(
    shared: AcpProcess, tmp_path: Path
) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    result = shared.result("session/close", {"sessionId": session_id})
    check_v2("CloseSessionResponse", result)
    assert result == {}


def test_a_deleted_session_is_gone_from_the_list(shared: AcpProcess, tmp_path: Path) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    result = shared.result("session/delete", {"sessionId": session_id})
    check_v2("DeleteSessionResponse", result)
    assert result == {}
    listed = shared.result("session/list", {"cwd": str(tmp_path)})
    assert listed == {"sessions": []}


def test_deleting_a_session_never_created_succeeds(shared: AcpProcess) -> None:
    # The kit's DELETE-203, and SPEC 4: there is nothing left to delete.
    assert shared.result("session/delete", {"sessionId": "tck-never-created"}) == {}


# ---------------------------------------------------------------------------------------------
# session/set_config_option.


def test_set_config_option_takes_an_id_value_and_answers_every_option(
    shared: AcpProcess, tmp_path: Path
) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    answer, _ = shared.exchange(
        "session/set_config_option",
        {"sessionId": session_id, "configId": "mode", "type": "id", "value": "plan"},
    )
    result = answer["result"]
    check_v2("SetSessionConfigOptionResponse", result)
    assert [option["configId"] for option in result["configOptions"]] == ["mode", "model"]
    assert result["configOptions"][0]["currentValue"] == "plan"


@pytest.mark.parametrize(
    ("kind", "value", "path"),
    [("boolean", "plan", "$.value"), ("id", True, "$.value"), ("colour", "plan", "$.type")],
)
def test_set_config_option_refuses_a_value_of_the_wrong_type(
    shared: AcpProcess, tmp_path: Path, kind: str, value: Any, path: str
) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    params = {"sessionId": session_id, "configId": "mode", "type": kind, "value": value}
    error = shared.error("session/set_config_option", params)
    assert (error["code"], error["data"]["path"]) == (-32602, path)


def test_set_config_option_without_a_type_names_the_field(
    shared: AcpProcess, tmp_path: Path
) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    params = {"sessionId": session_id, "configId": "mode", "value": "plan"}
    error = shared.error("session/set_config_option", params)
    assert error == {
        "code": -32602,
        "message": "Invalid params: Object missing required field `type`",
    }


# ---------------------------------------------------------------------------------------------
# The unstable session methods v1 has too, in v2's shapes.


def test_set_title_status_archive_and_unarchive_answer_v2s_shapes(
    shared: AcpProcess, tmp_path: Path
) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    answer, shown = shared.exchange(
        "session/set_title", {"sessionId": session_id, "title": "Plans"}
    )
    check_v2("SetSessionTitleResponse", answer["result"])
    assert answer["result"] == {"title": "Plans"}
    assert [frame["params"]["update"] for frame in shown] == [
        {"sessionUpdate": "session_info_update", "title": "Plans"}
    ]
    status = shared.result("session/status", {"sessionId": session_id})
    check_v2("SessionStatusResponse", status)
    assert status["status"] == "open"
    for method, response in (
        ("session/archive", "ArchiveSessionResponse"),
        ("session/unarchive", "UnarchiveSessionResponse"),
    ):
        result = shared.result(method, {"sessionId": session_id})
        check_v2(response, result)
        assert result == {}


# ---------------------------------------------------------------------------------------------
# Each version's own methods.


@pytest.mark.parametrize("method", ["authenticate", "logout", "session/load", "session/set_mode"])
def test_a_v1_method_is_not_found_on_a_v2_connection(shared: AcpProcess, method: str) -> None:
    frame = shared.request(method, {"sessionId": "s", "cwd": "/", "modeId": "plan"})
    assert_single_line_error(frame, -32601)


@pytest.mark.parametrize("method", ["auth/login", "auth/logout"])
def test_a_v2_method_is_not_found_on_a_v1_connection(server: AcpProcess, method: str) -> None:
    server.initialize()
    assert_single_line_error(server.request(method, {"methodId": "agent"}), -32601)


def test_the_history_api_serves_a_v2_connection(shared: AcpProcess, tmp_path: Path) -> None:
    session_id = new_session(shared, tmp_path)["sessionId"]
    address = {"kind": "session", "sessionId": session_id}
    # A new session's log holds no event yet: its last seq is -1.
    page = shared.result("session.page", {"address": address, "throughSeq": -1})
    assert page == {"records": [], "hasMore": False}


# ---------------------------------------------------------------------------------------------
# The JSON-RPC envelope.


def test_an_unknown_method_without_params_is_method_not_found_in_one_line(
    shared: AcpProcess,
) -> None:
    shared.send('{"jsonrpc":"2.0","id":"tck-x","method":"_tck/unknown"}')
    assert_single_line_error(shared.response("tck-x"), -32601)


def test_session_new_without_cwd_is_invalid_params_in_one_line(shared: AcpProcess) -> None:
    assert_single_line_error(shared.request("session/new", {}), -32602)


def test_ids_are_echoed_exactly(shared: AcpProcess, tmp_path: Path) -> None:
    new = {"cwd": str(tmp_path)}
    shared.send({"jsonrpc": "2.0", "id": "tck-string-id", "method": "session/new", "params": new})
    assert "result" in shared.response("tck-string-id")
    shared.send('{"jsonrpc":"2.0","id":424242,"method":"session/list"}')
    assert "result" in shared.response(424242)


# ---------------------------------------------------------------------------------------------
# Batches: the kit's lines, on a fresh v2 connection each.


@pytest.fixture
def v2(server: AcpProcess) -> AcpProcess:
    initialize_v2(server)
    return server


def test_an_empty_batch_is_one_invalid_request_object(v2: AcpProcess) -> None:
    v2.send("[]")
    assert json.loads(v2.read_line()) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid request: an empty array is not a request"},
    }


def test_a_batch_of_a_notification_alone_is_answered_by_nothing(v2: AcpProcess) -> None:
    v2.send('[{"jsonrpc":"2.0","method":"_tck/notify_only"}]')
    v2.send('{"jsonrpc":"2.0","id":"after","method":"session/list"}')
    assert "result" in v2.response("after")


def test_each_batch_element_that_is_no_object_is_an_invalid_request(v2: AcpProcess) -> None:
    v2.send("[17, true, null]")
    answers = json.loads(v2.read_line())
    assert (
        answers
        == [
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": -32600,
                    "message": "Invalid request: a batch element must be a JSON object",
                },
            }
        ]
        * 3
    )
    assert "result" in v2.request("session/list")


def test_the_answers_of_a_batch_of_requests_come_as_one_array(v2: AcpProcess) -> None:
    v2.send(
        '[{"jsonrpc":"2.0","id":"tck-batch-a","method":"session/list"},'
        '{"jsonrpc":"2.0","id":"tck-batch-b","method":"session/list"}]'
    )
    answers = json.loads(v2.read_line())
    assert isinstance(answers, list)
    assert sorted(answers, key=lambda answer: answer["id"]) == [
        {"jsonrpc": "2.0", "id": "tck-batch-a", "result": {"sessions": []}},
        {"jsonrpc": "2.0", "id": "tck-batch-b", "result": {"sessions": []}},
    ]


def test_a_batch_mixing_a_request_and_a_stray_answer_answers_the_request(
    v2: AcpProcess,
) -> None:
    v2.send(
        '[{"jsonrpc":"2.0","id":"tck-mixed-call","method":"_tck/does_not_exist"},'
        '{"jsonrpc":"2.0","id":"tck-mixed-response","result":{}}]'
    )
    (answer,) = json.loads(v2.read_line())
    assert (answer["id"], answer["error"]["code"]) == ("tck-mixed-call", -32601)


def test_a_v1_connection_still_refuses_a_batch_whole(server: AcpProcess) -> None:
    server.initialize()
    server.send('[{"jsonrpc":"2.0","id":"a","method":"session/list"}]')
    assert json.loads(server.read_line()) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": "Invalid request: batch requests are not supported"},
    }
