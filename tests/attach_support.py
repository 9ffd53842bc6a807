"""`acp-server attach` in tests: private runtime and state directories, relays, and the servers
they start, all stopped at the end.

`Places` holds a test's `XDG_RUNTIME_DIR` (a short directory of its own: a socket's path must fit
in 107 bytes) and `XDG_STATE_HOME`; `attach(...)` runs the relay command with them, and
`relay(...)` starts one as an `AcpProcess`. `editor(...)` and `browser()` are clients of the
shared server as `ws_server.Peer`s: an editor through a relay of its own, a browser over the
server's WebSocket with the kept token. `places` (a fixture) closes them and stops the servers it
started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from polling import TIMEOUT
from websockets.sync.client import connect
from ws_server import Peer

ATTACH = [sys.executable, "-m", "acp_server", "attach"]
INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


class RelayLine:
    """A relay's stdin and stdout as a `ws_server.Connection`: one frame a line."""

    def __init__(self, process: AcpProcess) -> None:
        self.process = process

    def send(self, message: str | bytes) -> None:
        self.process.send(message)

    def recv(self, timeout: float | None = None) -> str:
        return self.process.read_line(TIMEOUT if timeout is None else timeout).decode()

    def close(self) -> None:
        self.process.close()


@dataclass
class Places:
    runtime: Path
    state: Path
    cwd: Path
    clients: ExitStack = field(default_factory=ExitStack)
    """Every editor's relay and browser's connection, closed before the servers are stopped."""

    @property
    def env(self) -> dict[str, str]:
        return {"XDG_RUNTIME_DIR": str(self.runtime), "XDG_STATE_HOME": str(self.state)}

    @property
    def sockets(self) -> Path:
        return self.runtime / "acp-server"

    @property
    def states(self) -> Path:
        return self.state / "acp-server"

    def attach(self, *args: str, input: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        """Run `acp-server attach ARGS` to its end, `input` on its stdin."""
        return subprocess.run(
            [*ATTACH, *args],
            input=input,
            capture_output=True,
            timeout=TIMEOUT,
            env={**os.environ, **self.env},
            cwd=self.cwd,
        )

    def relay(self, *args: str) -> AcpProcess:
        """A relay, driven as an editor drives its agent (close it, or use it as a context)."""
        return AcpProcess(None, *args, command=ATTACH, env=self.env)

    def editor(self, *args: str, capabilities: dict[str, Any] | None = None) -> Peer:
        """An editor's connection through a relay of `attach ARGS`, initialized."""
        line = RelayLine(self.clients.enter_context(self.relay(*args)))
        return _initialized(Peer(line), capabilities)

    def browser(self, capabilities: dict[str, Any] | None = None) -> Peer:
        """A browser's WebSocket to the one running server's viewer (started with `--listen`),
        with the token of its state directory, initialized."""
        (line,) = self.status()
        viewer = line.split("  viewer ")[1].split()[0]
        (token_file,) = self.states.glob("*.token")
        url = f"{viewer.replace('http://', 'ws://')}acp?token={token_file.read_text().strip()}"
        ws = self.clients.enter_context(connect(url, open_timeout=TIMEOUT))
        return _initialized(Peer(ws), capabilities)

    def status(self) -> list[str]:
        """The lines of `attach --status`."""
        done = self.attach("--status")
        assert (done.returncode, done.stderr) == (0, b"")
        return done.stdout.decode().splitlines()

    def pids(self) -> list[int]:
        """The pids of the running servers, as `--status` names them."""
        return [int(line.split()[1]) for line in self.status()]


def initialized(relay: AcpProcess) -> dict[str, object]:
    """The result of `initialize` through `relay`."""
    request = relay.send_request("initialize", INITIALIZE)
    frame = json.loads(relay.read_line())
    assert frame["id"] == request
    result: dict[str, object] = frame["result"]
    return result


def _initialized(peer: Peer, capabilities: dict[str, Any] | None) -> Peer:
    peer.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities or {}})
    return peer


@pytest.fixture
def places(tmp_path: Path) -> Iterator[Places]:
    runtime = Path(tempfile.mkdtemp(prefix="acp-run-"))
    here = Places(runtime, tmp_path / "state", tmp_path / "cwd")
    here.cwd.mkdir()
    try:
        with here.clients:
            yield here
    finally:
        here.attach("--stop")
        shutil.rmtree(runtime, ignore_errors=True)
