"""Authentication and logout (SPEC 4.4): the stored key, `authMethods`, -32000 while no key is
available, `authenticate`, `logout` and `acp-server login`, with the key never shown."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp import schema
from acp_process import AcpProcess

from acp_server.providers.credentials import (
    CredentialsError,
    load_key,
    remove_key,
    store_key,
)
from acp_server.providers.secret import Secret

KEY = "sk-test-0123456789abcdefghijklmnop"
REMOTE = ("--provider", "openai", "--model", "gpt-4o", "--base-url", "https://api.invalid/v1")
AGENT_METHOD = {
    "id": "agent",
    "name": "API key",
    "description": "The key from the provider's environment variable (OPENAI_API_KEY unless "
    "--api-key-env says otherwise), or the one `acp-server login` stored",
}


def env_without_key(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return {**env, "ACP_SERVER_CONFIG_DIR": str(config)}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "config"


@pytest.fixture
def remote(tmp_path: Path, config: Path) -> Iterator[AcpProcess]:
    """A server for a remote OpenAI-compatible endpoint, started with no key anywhere."""
    with AcpProcess(tmp_path / "sessions", *REMOTE, env=env_without_key(config)) as server:
        yield server


def new_session(server: AcpProcess, tmp_path: Path) -> dict[str, Any]:
    return server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})


# ---------------------------------------------------------------------------------------------
# The stored key.


def test_a_stored_key_is_readable_by_its_owner_alone(config: Path) -> None:
    path = store_key(Secret(KEY), config / "credentials.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    loaded = load_key(path)
    assert loaded is not None and loaded.reveal() == KEY


def test_a_stored_key_others_can_read_is_refused(config: Path) -> None:
    path = store_key(Secret(KEY), config / "credentials.json")
    path.chmod(0o644)
    with pytest.raises(CredentialsError, match="readable by others than its owner"):
        load_key(path)


def test_removing_the_stored_key_says_whether_there_was_one(config: Path) -> None:
    path = store_key(Secret(KEY), config / "credentials.json")
    assert remove_key(path) is True
    assert remove_key(path) is False
    assert load_key(path) is None


# ---------------------------------------------------------------------------------------------
# Over the wire.


@pytest.mark.process
def test_initialize_lists_the_agent_method_and_logout(remote: AcpProcess) -> None:
    result = remote.result("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert result["authMethods"] == [AGENT_METHOD]
    assert result["agentCapabilities"]["auth"] == {"logout": {}}
    schema.InitializeResponse.model_validate(result)


@pytest.mark.process
def test_the_terminal_method_is_listed_only_for_a_client_that_advertises_it(
    remote: AcpProcess,
) -> None:
    result = remote.result(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}}
    )
    assert result["authMethods"][1] == {
        "type": "terminal",
        "id": "terminal",
        "name": "Log in in a terminal",
        "description": "Runs `acp-server login`: type the API key (it is not shown); it is "
        "stored readable by you alone",
        "env": {"ACP_SERVER_LOGIN": "1"},
    }
    schema.InitializeResponse.model_validate(result)


@pytest.mark.process
def test_without_a_key_session_new_answers_authentication_required(
    remote: AcpProcess, tmp_path: Path
) -> None:
    remote.initialize()
    error = new_session(remote, tmp_path)["error"]
    assert error["code"] == -32000
    assert error["message"].startswith("Authentication required: the model provider has no API key")
    assert remote.request("authenticate", {"methodId": "agent"})["error"]["code"] == -32000


@pytest.mark.process
def test_authenticate_finds_a_key_stored_meanwhile_and_logout_removes_it(
    remote: AcpProcess, tmp_path: Path, config: Path
) -> None:
    remote.initialize()
    store_key(Secret(KEY), config / "credentials.json")
    assert remote.result("authenticate", {"methodId": "agent"}) == {}
    assert "sessionId" in new_session(remote, tmp_path)["result"]
    assert remote.result("logout", {}) == {}
    assert not (config / "credentials.json").exists()
    assert new_session(remote, tmp_path)["error"]["code"] == -32000
    assert KEY not in remote.stderr
    assert all(KEY.encode() not in line for line in remote.stdout_lines)


@pytest.mark.process
def test_authenticate_with_an_unknown_method_is_invalid_params(remote: AcpProcess) -> None:
    remote.initialize()
    error = remote.request("authenticate", {"methodId": "terminal"})["error"]
    assert (error["code"], error["data"]) == (-32602, {"path": "$.methodId"})


@pytest.mark.process
def test_a_local_endpoint_needs_no_key(tmp_path: Path, config: Path) -> None:
    local = ("--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1")
    with AcpProcess(tmp_path / "sessions", *local, env=env_without_key(config)) as server:
        server.initialize()
        assert "sessionId" in new_session(server, tmp_path)["result"]


@pytest.mark.process
def test_replay_needs_no_key_and_authenticate_and_logout_succeed(
    tmp_path: Path, config: Path
) -> None:
    with AcpProcess(tmp_path / "sessions", env=env_without_key(config)) as server:
        server.initialize()
        assert server.result("authenticate", {"methodId": "agent"}) == {}
        assert server.result("logout", {}) == {}


@pytest.mark.process
def test_replay_lists_no_auth_method_answered_early(tmp_path: Path, config: Path) -> None:
    sessions = tmp_path / "sessions"
    with AcpProcess(sessions, "--log-level", "info", env=env_without_key(config)) as server:
        capabilities = {"auth": {"terminal": True}}
        result = server.result(
            "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities}
        )
        assert server.finish() == 0
    assert "initialize answered while the server started" in server.stderr
    assert result["authMethods"] == []


@pytest.mark.process
def test_replay_lists_no_auth_method_answered_by_the_connection(
    tmp_path: Path, config: Path
) -> None:
    sessions = tmp_path / "sessions"
    with AcpProcess(sessions, "--log-level", "info", env=env_without_key(config)) as server:
        server.send(b'{"jsonrpc":"2.0","id":0,')  # a first line the early answer leaves
        assert server.read_frame()["error"]["code"] == -32700
        capabilities = {"auth": {"terminal": True}}
        result = server.result(
            "initialize", {"protocolVersion": 1, "clientCapabilities": capabilities}
        )
        assert server.finish() == 0
    assert "initialize answered while the server started" not in server.stderr
    assert result["authMethods"] == []


@pytest.mark.process
def test_a_local_endpoint_lists_no_auth_method(tmp_path: Path, config: Path) -> None:
    local = ("--provider", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1")
    with AcpProcess(tmp_path / "sessions", *local, env=env_without_key(config)) as server:
        assert server.initialize()["authMethods"] == []


# ---------------------------------------------------------------------------------------------
# acp-server login / logout.


def run_cli(config: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=env_without_key(config),
        timeout=60,
        check=False,
    )


@pytest.mark.process
def test_login_stores_the_key_without_showing_it_and_logout_removes_it(config: Path) -> None:
    done = run_cli(config, "login", stdin=KEY + "\n")
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout + done.stderr
    path = config / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = load_key(path)
    assert loaded is not None and loaded.reveal() == KEY
    removed = run_cli(config, "logout")
    assert (removed.returncode, path.exists()) == (0, False)


@pytest.mark.process
def test_the_terminal_method_runs_login_whatever_the_arguments(config: Path) -> None:
    env = {**env_without_key(config), "ACP_SERVER_LOGIN": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", "--pace-ms", "5"],
        input=KEY + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (config / "credentials.json").exists()
