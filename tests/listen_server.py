"""`acp-server serve --listen` as a subprocess for the tests that talk to it over the network,
and a small synchronous JSON-RPC client over its WebSocket.

`ListenServer.start` runs the server on a free loopback port and reads where it listens from
its first two stderr lines (SPEC 3.4: the WebSocket address, then the viewer's URL with the
token); `stop` ends it with SIGTERM, and kills it if it does not go.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlencode

import msgspec
from websockets.sync.client import ClientConnection, connect

from acp_server.core.history import expand_history_records
from acp_server.demo import WORKSPACE_FILES, recorded_prompt

_VIEWER_LINE = re.compile(
    r"^acp-server: session viewer at (http://127\.0\.0\.1:(\d+))/\?token=(\S+)$"
)
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0


@dataclass
class ListenServer:
    process: subprocess.Popen[str]
    base_url: str
    """`http://127.0.0.1:PORT`, the viewer's address."""
    port: int
    token: str
    sessions_dir: Path

    @classmethod
    def start(cls, sessions_dir: Path, *args: str) -> Self:
        command = [
            sys.executable,
            "-m",
            "acp_server",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--sessions-dir",
            str(sessions_dir),
            *args,
        ]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
        assert process.stderr is not None
        lines = []
        try:
            for line in process.stderr:
                lines.append(line)
                found = _VIEWER_LINE.match(line.rstrip("\n"))
                if found is not None:
                    base, port, token = found.groups()
                    return cls(process, base, int(port), token, sessions_dir)
        except BaseException:
            _end(process)
            raise
        _end(process)
        raise RuntimeError(f"the server never said where it listens: {''.join(lines)!r}")

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/acp"

    def viewer_url(self, path: str = "/", token: str | None = None, **query: object) -> str:
        """The viewer's page at `path`, with the token (or `token`) and `query` in its query."""
        params = urlencode({"token": self.token if token is None else token, **query})
        return f"{self.base_url}{path}?{params}"

    def client(self) -> AbstractContextManager[RpcClient]:
        return RpcClient.open(self.ws_url, self.token)

    def stop(self) -> None:
        _end(self.process)


def _end(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    if process.stderr is not None:
        process.stderr.close()


class RpcError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class RpcClient:
    """JSON-RPC over the WebSocket, one call at a time: while it waits for an answer it answers
    the server's permission requests (allow once) and drops notifications."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self._ids = itertools.count(1)

    @classmethod
    @contextmanager
    def open(cls, url: str, token: str) -> Iterator[Self]:
        """A client connected to `url` and initialized; closed on exit."""
        with connect(url, additional_headers={"Authorization": f"Bearer {token}"}) as socket:
            client = cls(socket)
            client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            yield client

    def call(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self._ids)
        self.socket.send(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        )
        while True:
            message = json.loads(self.socket.recv(timeout=START_TIMEOUT))
            if message.get("id") == request_id and "method" not in message:
                if "error" in message:
                    raise RpcError(message["error"])
                return message["result"]
            if "method" in message and "id" in message:
                self._answer(message)

    def _answer(self, message: dict[str, Any]) -> None:
        if message["method"] == "session/request_permission":
            options = message["params"]["options"]
            chosen = next(o["optionId"] for o in options if o["kind"].startswith("allow"))
            result: dict[str, Any] = {"outcome": {"outcome": "selected", "optionId": chosen}}
            self.socket.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        else:
            error = {"code": -32601, "message": f"Method not found: {message['method']}"}
            self.socket.send(json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}))

    def new_session(self, cwd: Path) -> str:
        """A new session in `cwd`, which is given the files the demo recording works on."""
        for name, text in WORKSPACE_FILES.items():
            (cwd / name).write_text(text)
        result = self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        session_id: str = result["sessionId"]
        return session_id

    def prompt_demo(self, session_id: str) -> dict[str, Any]:
        """The bundled recording's prompt, answered once its turn has ended."""
        prompt = [{"type": "text", "text": recorded_prompt()}]
        result: dict[str, Any] = self.call(
            "session/prompt", {"sessionId": session_id, "prompt": prompt}
        )
        return result

    def events(self, session_id: str) -> list[dict[str, Any]]:
        """Every event of the session's log, as plain JSON, in seq order."""
        address = {"kind": "session", "sessionId": session_id}
        snapshot = self.call("session.follow", {"address": address, "maxMessages": 100_000})
        self.call("session.unfollow", {"subscriptionId": snapshot["subscriptionId"]})
        assert snapshot["hasMore"] is False
        events = expand_history_records(snapshot["records"])
        decoded: list[dict[str, Any]] = msgspec.json.decode(msgspec.json.encode(events))
        return decoded
