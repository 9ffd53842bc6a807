"""Authentication and logout (SPEC 4.4): the stored key, `authMethods`, -32000 while no key is
available, `authenticate`, `logout` and `acp-server login`, with the key never shown."""

from __future__ import annotations

import json
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
    KeyName,
    key_name,
    load_key,
    load_keys,
    remove_key,
    store_key,
)
from acp_server.providers.secret import Secret

KEY = "sk-test-0123456789abcdefghijklmnop"
REMOTE = ("--provider", "openai", "--model", "gpt-4o", "--base-url", "https://api.invalid/v1")
AGENT_METHOD = {
    "id": "agent",
    "name": "API key",
    "description": "The key from the provider's environment variable (OPENAI_API_KEY or "
    "ANTHROPIC_API_KEY unless --api-key-env says otherwise), or the one `acp-server login` "
    "stored for that provider",
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


OPENAI = KeyName("openai")
ANTHROPIC = KeyName("anthropic")
OTHER_KEY = "sk-ant-test-9876543210zyxwvutsrqpo"


def revealed(keys: dict[KeyName, Secret]) -> dict[KeyName, str]:
    return {name: key.reveal() for name, key in keys.items()}


def test_a_stored_key_is_readable_by_its_owner_alone(config: Path) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(config.stat().st_mode) == 0o700
    loaded = load_key(OPENAI, path)
    assert loaded is not None and loaded.reveal() == KEY


def test_a_stored_key_others_can_read_is_refused(config: Path) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    path.chmod(0o644)
    with pytest.raises(CredentialsError, match="readable by others than its owner"):
        load_key(OPENAI, path)


def test_removing_the_stored_key_says_whether_there_was_one(config: Path) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    assert remove_key(OPENAI, path) is True
    assert remove_key(OPENAI, path) is False
    assert load_key(OPENAI, path) is None


def test_each_provider_reads_only_the_key_stored_for_it(config: Path) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    assert load_key(ANTHROPIC, path) is None
    store_key(Secret(OTHER_KEY), ANTHROPIC, path)
    assert revealed(load_keys(path)) == {OPENAI: KEY, ANTHROPIC: OTHER_KEY}


def test_a_key_for_another_api_root_is_its_own_entry(config: Path) -> None:
    gateway = key_name("openai", "https://gateway.example/v1/")
    assert gateway == KeyName("openai", "https://gateway.example/v1")
    path = store_key(Secret(OTHER_KEY), gateway, config / "credentials.json")
    assert load_key(OPENAI, path) is None
    store_key(Secret(KEY), OPENAI, path)
    assert revealed(load_keys(path)) == {OPENAI: KEY, gateway: OTHER_KEY}
    assert json_of(path) == {
        "keys": [
            {"provider": "openai", "apiKey": KEY},
            {"provider": "openai", "baseUrl": "https://gateway.example/v1", "apiKey": OTHER_KEY},
        ]
    }


def test_the_default_api_root_names_the_providers_own_key() -> None:
    assert key_name("openai", "https://api.openai.com/v1/") == OPENAI
    assert key_name("anthropic", "https://api.anthropic.com") == ANTHROPIC
    assert key_name("anthropic", None) == ANTHROPIC


def test_removing_one_key_keeps_the_others_and_removing_all_removes_the_file(
    config: Path,
) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    store_key(Secret(OTHER_KEY), ANTHROPIC, path)
    assert remove_key(ANTHROPIC, path) is True
    assert revealed(load_keys(path)) == {OPENAI: KEY}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store_key(Secret(OTHER_KEY), ANTHROPIC, path)
    assert remove_key(None, path) is True
    assert not path.exists()
    assert remove_key(None, path) is False


def test_removing_the_last_key_removes_the_file(config: Path) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    assert remove_key(OPENAI, path) is True
    assert not path.exists()


def test_the_single_key_of_an_earlier_file_becomes_the_openai_key(config: Path) -> None:
    path = legacy_file(config)
    assert revealed(load_keys(path)) == {OPENAI: KEY}
    assert json_of(path) == {"keys": [{"provider": "openai", "apiKey": KEY}]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_key(ANTHROPIC, path) is None


def test_a_file_login_did_not_write_is_refused(config: Path) -> None:
    path = legacy_file(config)
    path.write_text('{"keys": [{"provider": "openai"}]}')
    with pytest.raises(CredentialsError, match="not what `acp-server login` writes"):
        load_keys(path)


def legacy_file(config: Path) -> Path:
    """The file an earlier `acp-server login` wrote: one key, no provider."""
    config.mkdir(mode=0o700)
    path = config / "credentials.json"
    path.touch(mode=0o600)
    path.write_text(json.dumps({"apiKey": KEY}))
    return path


def json_of(path: Path) -> Any:
    return json.loads(path.read_text())


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
        "stored for this provider, readable by you alone",
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
    assert error["message"] == (
        "Authentication required: the model provider has no API key; set it in the provider's "
        "environment variable or run `acp-server login --provider openai --base-url "
        "https://api.invalid/v1`, then authenticate"
    )
    assert remote.request("authenticate", {"methodId": "agent"})["error"]["code"] == -32000


@pytest.mark.process
def test_authenticate_finds_a_key_stored_meanwhile_and_logout_removes_it(
    remote: AcpProcess, tmp_path: Path, config: Path
) -> None:
    remote.initialize()
    store_key(Secret(KEY), key_name("openai", REMOTE[-1]), config / "credentials.json")
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
    assert revealed(load_keys(path)) == {OPENAI: KEY}
    removed = run_cli(config, "logout")
    assert (removed.returncode, path.exists()) == (0, False)


@pytest.mark.process
def test_login_stores_the_key_of_the_provider_and_api_root_it_names(config: Path) -> None:
    gateway = ("--base-url", "https://gateway.example/v1")
    assert run_cli(config, "login", "--provider", "anthropic", stdin=OTHER_KEY).returncode == 0
    done = run_cli(config, "login", "--provider", "openai", *gateway, stdin=KEY)
    assert done.returncode == 0, done.stderr
    stored = f"key for openai at https://gateway.example/v1 stored in {config}/credentials.json"
    assert f"acp-server login: {stored} (readable by you alone)\n" in done.stderr
    assert revealed(load_keys(config / "credentials.json")) == {
        ANTHROPIC: OTHER_KEY,
        KeyName("openai", "https://gateway.example/v1"): KEY,
    }


@pytest.mark.process
def test_logout_with_a_provider_removes_its_key_alone(config: Path) -> None:
    path = store_key(Secret(KEY), OPENAI, config / "credentials.json")
    store_key(Secret(OTHER_KEY), ANTHROPIC, path)
    done = run_cli(config, "logout", "--provider", "anthropic")
    assert (done.returncode, done.stderr) == (
        0,
        f"acp-server logout: removed the key for anthropic from {path}\n",
    )
    assert revealed(load_keys(path)) == {OPENAI: KEY}
    again = run_cli(config, "logout", "--provider", "anthropic")
    assert (again.returncode, again.stderr) == (
        0,
        "acp-server logout: no stored key for anthropic\n",
    )


@pytest.mark.process
def test_login_refuses_an_api_root_the_server_would_refuse(config: Path) -> None:
    done = run_cli(config, "login", "--base-url", "file:///x", stdin=KEY)
    assert (done.returncode, done.stderr) == (
        2,
        "acp-server login: error: --base-url: not an http(s) URL: 'file:///x'\n",
    )
    assert not (config / "credentials.json").exists()


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
    assert revealed(load_keys(config / "credentials.json")) == {OPENAI: KEY}


@pytest.mark.process
def test_the_terminal_method_stores_the_key_for_the_servers_provider_and_api_root(
    config: Path,
) -> None:
    env = {**env_without_key(config), "ACP_SERVER_LOGIN": "1"}
    server = ["--provider=anthropic", "--model", "m", "--base-url", "https://gw.example"]
    done = subprocess.run(
        [sys.executable, "-m", "acp_server", *server],
        input=KEY + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert revealed(load_keys(config / "credentials.json")) == {
        KeyName("anthropic", "https://gw.example"): KEY
    }
