"""`acp-server attach` in tests: private runtime and state directories, relays, and the servers
they start, all stopped at the end.

`Places` holds a test's `XDG_RUNTIME_DIR` (a short directory of its own: a socket's path must fit
in 107 bytes) and `XDG_STATE_HOME`; `attach(...)` runs the relay command with them, and
`relay(...)` starts one as an `AcpProcess`. `places` (a fixture) stops the servers it started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from acp_process import AcpProcess
from polling import TIMEOUT

ATTACH = [sys.executable, "-m", "acp_server", "attach"]
INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


@dataclass
class Places:
    runtime: Path
    state: Path
    cwd: Path

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


@pytest.fixture
def places(tmp_path: Path) -> Iterator[Places]:
    runtime = Path(tempfile.mkdtemp(prefix="acp-run-"))
    here = Places(runtime, tmp_path / "state", tmp_path / "cwd")
    here.cwd.mkdir()
    try:
        yield here
    finally:
        here.attach("--stop")
        shutil.rmtree(runtime, ignore_errors=True)
