"""`acp-server attach`: the relay an editor spawns, and the user's shared server behind it."""

from __future__ import annotations

import json
import os
import pwd
import signal
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from acp_process import AcpProcess
from attach_support import ATTACH, Places, initialized, places
from polling import TIMEOUT, wait_until
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from acp_server.providers.credentials import KeyName, load_keys
from acp_server.startup import attach, handshake

pytestmark = pytest.mark.process

__all__ = ["places"]  # the fixture

INITIALIZE_LINE = b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}\n'


def test_frames_pass_through_the_relay_unchanged(places: Places, tmp_path: Path) -> None:
    sessions = str(tmp_path / "sessions")
    lines = INITIALIZE_LINE + b'{"jsonrpc":"2.0","id":8,"method":"no/such"}\n{"jsonrpc":\n'
    relayed = places.attach("--sessions-dir", sessions, input=lines)
    direct = subprocess.run(
        [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", sessions],
        input=lines,
        capture_output=True,
        timeout=TIMEOUT,
    )
    assert (relayed.returncode, relayed.stderr) == (0, b"")
    assert relayed.stdout == direct.stdout
    assert len(relayed.stdout.splitlines()) == 3


def test_a_second_attach_reaches_the_same_server(places: Places, tmp_path: Path) -> None:
    sessions = str(tmp_path / "sessions")
    with places.relay("--sessions-dir", sessions) as first:
        initialized(first)
        (pid,) = places.pids()
        with places.relay("--sessions-dir", sessions) as second:
            initialized(second)
            assert places.pids() == [pid]
    assert places.attach("--sessions-dir", sessions, input=INITIALIZE_LINE).returncode == 0
    assert places.pids() == [pid]


def test_relays_started_together_start_one_server(places: Places, tmp_path: Path) -> None:
    sessions = str(tmp_path / "sessions")
    relays = [places.relay("--sessions-dir", sessions) for _ in range(3)]
    try:
        for relay in relays:
            initialized(relay)
        assert len(places.pids()) == 1
    finally:
        for relay in relays:
            relay.close()


def test_other_flags_start_another_server(places: Places, tmp_path: Path) -> None:
    sessions = str(tmp_path / "sessions")
    places.attach("--sessions-dir", sessions, input=INITIALIZE_LINE)
    places.attach("--sessions-dir", sessions, "--mode", "plan", input=INITIALIZE_LINE)
    assert len(set(places.pids())) == 2


def test_a_relative_sessions_dir_reaches_the_server_of_the_absolute_one(
    places: Places,
) -> None:
    places.attach("--sessions-dir", "sessions", input=INITIALIZE_LINE)
    places.attach("--sessions-dir", str(places.cwd / "sessions"), input=INITIALIZE_LINE)
    (line,) = places.status()
    assert f"store {places.cwd / 'sessions'}" in line


def test_status_names_pid_socket_and_store(places: Places, tmp_path: Path) -> None:
    assert places.status() == []
    sessions = str(tmp_path / "sessions")
    places.attach("--sessions-dir", sessions, input=INITIALIZE_LINE)
    (line,) = places.status()
    (sock,) = places.sockets.glob("*.sock")
    pid = json.loads(sock.with_suffix(".json").read_text())["pid"]
    assert line == f"pid {pid}  socket {sock}  store {sessions}"


def test_the_files_of_a_dead_server_are_cleaned_and_the_next_attach_starts_another(
    places: Places, tmp_path: Path
) -> None:
    sessions = str(tmp_path / "sessions")
    places.attach("--sessions-dir", sessions, input=INITIALIZE_LINE)
    (pid,) = places.pids()
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _alive(pid), "the server is gone")
    assert places.status() == []
    assert list(places.sockets.iterdir()) == []
    assert places.attach("--sessions-dir", sessions, input=INITIALIZE_LINE).returncode == 0
    assert len(places.pids()) == 1
    assert places.pids() != [pid]


def test_stop_stops_every_server_and_status_is_empty_after(places: Places, tmp_path: Path) -> None:
    places.attach("--sessions-dir", str(tmp_path / "a"), input=INITIALIZE_LINE)
    places.attach("--sessions-dir", str(tmp_path / "b"), input=INITIALIZE_LINE)
    pids = places.pids()
    done = places.attach("--stop")
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert places.status() == []
    assert [pid for pid in pids if _alive(pid)] == []
    assert sorted(p.name for p in places.sockets.iterdir()) == []


def test_stop_with_flags_stops_only_that_server(places: Places, tmp_path: Path) -> None:
    places.attach("--sessions-dir", str(tmp_path / "a"), input=INITIALIZE_LINE)
    places.attach("--sessions-dir", str(tmp_path / "b"), input=INITIALIZE_LINE)
    assert places.attach("--stop", "--sessions-dir", str(tmp_path / "a")).returncode == 0
    (line,) = places.status()
    assert line.endswith(f"store {tmp_path / 'b'}")


def test_a_relay_exits_when_its_server_is_stopped(places: Places, tmp_path: Path) -> None:
    with places.relay("--sessions-dir", str(tmp_path / "sessions")) as relay:
        initialized(relay)
        assert places.attach("--stop").returncode == 0
        assert relay.wait(TIMEOUT) == 1
        assert relay.stderr == (
            "acp-server attach: the shared server closed the connection (stopped?)\n"
        )


def test_bad_flags_exit_2_with_the_servers_message(places: Places) -> None:
    done = places.attach("--pace-ms", "-1")
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1] == (
        "acp-server serve: error: argument --pace-ms: must not be negative, got '-1'"
    )
    assert places.status() == []


def test_the_socket_is_0600_in_a_0700_directory_and_the_token_file_0600(
    places: Places, tmp_path: Path
) -> None:
    places.attach("--sessions-dir", str(tmp_path / "s"), "--listen", "0", input=INITIALIZE_LINE)
    (sock,) = places.sockets.glob("*.sock")
    (token,) = places.states.glob("*.token")
    modes = [stat.S_IMODE(os.stat(p).st_mode) for p in (places.sockets, sock, token, places.states)]
    assert modes == [0o700, 0o600, 0o600, 0o700]
    (line,) = places.status()
    assert f"(token in {token})" in line


def test_the_viewer_token_is_kept_across_restarts(places: Places, tmp_path: Path) -> None:
    flags = ("--sessions-dir", str(tmp_path / "s"), "--listen", "0")
    places.attach(*flags, input=INITIALIZE_LINE)
    (token,) = places.states.glob("*.token")
    first = token.read_text()
    places.attach("--stop")
    places.attach(*flags, input=INITIALIZE_LINE)
    assert token.read_text() == first
    assert len(first.strip()) == 43


def test_attach_listen_serves_the_viewer_and_websocket_with_the_kept_token(
    places: Places, tmp_path: Path
) -> None:
    places.attach("--sessions-dir", str(tmp_path / "s"), "--listen", "0", input=INITIALIZE_LINE)
    (line,) = places.status()
    viewer = line.split("  viewer ")[1].split()[0]
    (token_file,) = places.states.glob("*.token")
    token = token_file.read_text().strip()
    with urllib.request.urlopen(viewer, timeout=TIMEOUT) as page:
        assert (page.status, page.headers["Content-Type"]) == (200, "text/html; charset=utf-8")
    acp = viewer.replace("http://", "ws://") + "acp"
    with connect(f"{acp}?token={token}", open_timeout=TIMEOUT) as ws:
        ws.send(INITIALIZE_LINE.decode().strip())
        assert json.loads(ws.recv(timeout=TIMEOUT))["id"] == 7
    with pytest.raises(InvalidStatus) as refused:
        connect(f"{acp}?token=not-{token}", open_timeout=TIMEOUT)
    assert refused.value.response.status_code == 401


def test_a_socket_directory_others_may_enter_is_refused(places: Places) -> None:
    places.sockets.mkdir(parents=True, mode=0o755)
    places.sockets.chmod(0o755)
    done = places.attach(input=INITIALIZE_LINE)
    assert (done.returncode, done.stderr.decode()) == (
        1,
        f"acp-server attach: {places.sockets} may be entered by others (mode 755): "
        "it must be 0700\n",
    )


def test_the_relay_imports_the_standard_library_only(places: Places, tmp_path: Path) -> None:
    sessions = str(tmp_path / "sessions")
    places.attach("--sessions-dir", sessions, input=INITIALIZE_LINE)  # the server is warm
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *ATTACH[1:], "--sessions-dir", sessions],
        input=INITIALIZE_LINE,
        capture_output=True,
        timeout=TIMEOUT,
        env={**os.environ, **places.env},
    )
    assert done.returncode == 0
    imported = _imported(done.stderr)
    ours = {name for name in imported if name.split(".")[0] == "acp_server"}
    others = {name.split(".")[0].lstrip("_") for name in imported - ours}
    assert ours <= {
        "acp_server",
        "acp_server.__main__",
        "acp_server.startup",
        "acp_server.startup.launch",
        "acp_server.startup.attach",
        "acp_server.startup.attach_flags",
        "acp_server.startup.attach_places",
    }
    assert {"asyncio", "anyio", "msgspec", "subprocess", "threading"} & others == set()
    interpreter = _imports([sys.executable, "-X", "importtime", "-c", "pass"])
    assert others - interpreter - {n.lstrip("_") for n in sys.stdlib_module_names} == set()


def test_the_terminal_auth_method_on_an_attach_command_line_logs_in_and_starts_no_server(
    places: Places, tmp_path: Path
) -> None:
    config = tmp_path / "config"
    key = "sk-test-0123456789abcdefghijklmnop"
    env = {n: v for n, v in os.environ.items() if n not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env |= {**places.env, "ACP_SERVER_CONFIG_DIR": str(config), "ACP_SERVER_LOGIN": "1"}
    flags = ["--provider=anthropic", "--model", "m", "--sessions-dir", str(tmp_path / "s")]
    done = subprocess.run(
        [*ATTACH, *flags], input=f"{key}\n".encode(), capture_output=True, env=env, timeout=TIMEOUT
    )
    assert done.returncode == 0, done.stderr
    keys = load_keys(config / "credentials.json")
    assert {name: secret.reveal() for name, secret in keys.items()} == {
        KeyName("anthropic", None): key
    }
    assert places.status() == []
    assert attach.LOGIN_ENV == handshake.LOGIN_ENV


PEER_PROGRAM = """
import socket, sys
peer = socket.socket(socket.AF_UNIX)
peer.settimeout(60)
peer.connect(sys.argv[1])
try:
    peer.sendall(sys.argv[2].encode())
    answer = peer.recv(4096)
except (BrokenPipeError, ConnectionResetError):
    answer = b""
print("closed" if answer == b"" else "answered")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another user needs root")
def test_a_peer_of_another_uid_is_refused(places: Places, tmp_path: Path) -> None:
    places.attach("--sessions-dir", str(tmp_path / "s"), input=INITIALIZE_LINE)
    (sock,) = places.sockets.glob("*.sock")
    nobody = pwd.getpwnam("nobody")
    python = _interpreter_for(nobody)
    # Loosened for the test only: the server must refuse the peer by its uid alone.
    loosened = [(places.runtime, 0o711), (places.sockets, 0o711), (sock, 0o666)]
    try:
        for path, mode in loosened:
            path.chmod(mode)
        peer = subprocess.run(
            [python, "-I", "-c", PEER_PROGRAM, str(sock), INITIALIZE_LINE.decode()],
            capture_output=True,
            timeout=TIMEOUT,
            user=nobody.pw_uid,
            group=nobody.pw_gid,
            extra_groups=[],
            cwd="/",
        )
    finally:
        for path, _ in loosened:
            path.chmod(0o600 if path == sock else 0o700)
    assert (peer.stdout, peer.stderr) == (b"closed\n", b"")
    (log,) = places.states.glob("*.log")
    wait_until(lambda: f"refused a connection of uid {nobody.pw_uid}" in log.read_text(), "logged")
    assert log.read_text().count("refused a connection") == 1


def test_a_relay_spawned_as_an_editor_spawns_serve_gets_answers(
    places: Places, tmp_path: Path
) -> None:
    relay: AcpProcess
    with places.relay("--sessions-dir", str(tmp_path / "sessions")) as relay:
        initialized(relay)
        request = relay.send_request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        frame = json.loads(relay.read_line())
        assert frame["id"] == request
        assert isinstance(frame["result"]["sessionId"], str)


def _interpreter_for(user: pwd.struct_passwd) -> str:
    """A Python interpreter `user` may run (this one may be in a home others cannot enter)."""
    for candidate in (os.path.realpath(sys.executable), "/usr/bin/python3"):
        try:
            subprocess.run(
                [candidate, "-I", "-c", ""],
                check=True,
                timeout=TIMEOUT,
                user=user.pw_uid,
                group=user.pw_gid,
                extra_groups=[],
                cwd="/",
            )
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    pytest.skip(f"no Python interpreter that {user.pw_name} may run")


def _imported(importtime: bytes) -> set[str]:
    """The modules an `-X importtime` report names."""
    return {
        line.split("|")[-1].strip()
        for line in importtime.decode().splitlines()
        if line.startswith("import time:") and not line.endswith("imported package")
    }


def _imports(argv: list[str]) -> set[str]:
    """The top-level names of the modules `argv` (run with `-X importtime`) imports."""
    done = subprocess.run(argv, capture_output=True, timeout=TIMEOUT, check=True)
    return {name.split(".")[0].lstrip("_") for name in _imported(done.stderr)}


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return file.read().rpartition(b")")[2].split()[0] != b"Z"
    except FileNotFoundError:
        return False
