"""WebSocket against stdio: round trips, and a long history paged over the network.

In one run:

(a) round trips: sequential `initialize` requests (answered inline, so the figure is the
    transport and the JSON-RPC stack, not a handler), `--requests` per round, over a fresh
    `acp-server serve` on a stdio pipe and over a fresh `serve --listen 127.0.0.1:0` on a loopback
    WebSocket; rounds alternate, each rate is the median of its rounds;
(b) paging: the whole history of `benchmarks/load.py`'s session (1,000 turns, 409,000 events)
    read with `session.page` from newest to oldest (50 messages a page, as a viewer scrolling
    back would), over stdio and over WebSocket with and without permessage-deflate; the time to
    the last page, and the bytes received (the WebSocket's as counted on the socket: frames,
    compressed where negotiated).

The WebSocket client is `websockets`' sans-I/O `ClientProtocol` over a plain socket, so that
every byte received is counted and no client library's buffering is measured.

Run from the repository root: `python benchmarks/websocket.py [--requests N] [--rounds N]`.
Human-readable lines go to stderr; stdout gets exactly one line, `WEBSOCKET_PERF_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from load import SESSION_ID, write_session  # noqa: E402
from websockets.client import ClientProtocol  # noqa: E402
from websockets.extensions.permessage_deflate import ClientPerMessageDeflateFactory  # noqa: E402
from websockets.frames import Frame, Opcode  # noqa: E402
from websockets.http11 import Response  # noqa: E402
from websockets.uri import parse_uri  # noqa: E402

from acp_server.storage.jsonl.sessions import SessionStore  # noqa: E402

ANNOUNCE = re.compile(r"viewer at http://([^/]+)/\?token=(\S+)")
INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}
TIMEOUT_S = 120.0
SERVE = [sys.executable, "-m", "acp_server", "serve"]


def say(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


class StdioPeer:
    def __init__(self, sessions: Path) -> None:
        self.process = subprocess.Popen(
            [*SERVE, "--sessions-dir", str(sessions)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.received = 0
        self._id = 0

    def request(self, method: str, params: Any) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self._id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        while True:
            raw = self.process.stdout.readline()
            self.received += len(raw)
            frame = json.loads(raw)
            if frame.get("id") == self._id and "method" not in frame:
                return frame["result"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(TIMEOUT_S)


class WebSocketPeer:
    """A minimal blocking client: the sans-I/O protocol over a socket, bytes counted."""

    def __init__(self, address: str, token: str, *, compression: bool) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.protocol = ClientProtocol(
            parse_uri(f"ws://{address}/acp?token={token}"),
            extensions=[ClientPerMessageDeflateFactory()] if compression else None,
            max_size=None,
        )
        self.received = 0
        self._id = 0
        self._messages: list[bytes] = []
        self._fragments: list[bytes] = []
        self.protocol.send_request(self.protocol.connect())
        self._flush()
        while True:
            events = self._receive()
            responses = [e for e in events if isinstance(e, Response)]
            if responses:
                assert responses[0].status_code == 101, responses[0].status_code
                break
        self.compressed = bool(self.protocol.extensions)

    def _flush(self) -> None:
        for data in self.protocol.data_to_send():
            if data:
                self.sock.sendall(data)

    def _receive(self) -> list[Any]:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.received += len(data)
        self.protocol.receive_data(data)
        self._flush()
        return self.protocol.events_received()

    def _next_message(self) -> bytes:
        while not self._messages:
            for event in self._receive():
                if isinstance(event, Frame) and event.opcode in (Opcode.TEXT, Opcode.CONT):
                    self._fragments.append(bytes(event.data))
                    if event.fin:
                        self._messages.append(b"".join(self._fragments))
                        self._fragments = []
        return self._messages.pop(0)

    def request(self, method: str, params: Any) -> Any:
        self._id += 1
        message = {"jsonrpc": "2.0", "id": self._id, "method": method, "params": params}
        self.protocol.send_text(json.dumps(message).encode())
        self._flush()
        while True:
            frame = json.loads(self._next_message())
            if frame.get("id") == self._id and "method" not in frame:
                return frame["result"]

    def close(self) -> None:
        self.protocol.send_close()
        self._flush()
        self.sock.close()


class Listening:
    def __init__(self, sessions: Path) -> None:
        self.process = subprocess.Popen(
            [*SERVE, "--sessions-dir", str(sessions), "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            match = ANNOUNCE.search(raw.decode())
            if match:
                self.address, self.token = match[1], match[2]
                break
        else:
            raise RuntimeError("the server did not say where it listens")

    def connect(self, *, compression: bool = True) -> WebSocketPeer:
        return WebSocketPeer(self.address, self.token, compression=compression)

    def close(self) -> None:
        self.process.terminate()
        self.process.wait(TIMEOUT_S)
        assert self.process.stderr is not None
        self.process.stderr.close()


def round_trips(peer: StdioPeer | WebSocketPeer, requests: int) -> float:
    peer.request("initialize", INITIALIZE)  # warm
    start = time.perf_counter()
    for _ in range(requests):
        peer.request("initialize", INITIALIZE)
    return requests / (time.perf_counter() - start)


def page_everything(peer: StdioPeer | WebSocketPeer) -> tuple[float, int, int]:
    """Seconds to page the whole session back, bytes received meanwhile, records."""
    peer.request("initialize", INITIALIZE)
    address = {"kind": "session", "sessionId": SESSION_ID}
    before = peer.received
    start = time.perf_counter()
    cursor = peer.request("session.follow", {"address": address, "maxMessages": 1})["cursor"]
    params: dict[str, Any] = {"address": address, "throughSeq": cursor}
    records = 0
    while True:
        page = peer.request("session.page", params)
        records += len(page["records"])
        if not page["hasMore"]:
            break
        first = page["records"][0]
        params["beforeSeq"] = first["event"]["seq"] if "event" in first else first["chunks"]["seq0"]
    return time.perf_counter() - start, peer.received - before, records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        empty = root / "empty"
        say(f"round trips: {args.requests} initialize requests a round, {args.rounds} rounds")
        rates: dict[str, list[float]] = {"stdio": [], "websocket": []}
        for _ in range(args.rounds):
            stdio = StdioPeer(empty)
            rates["stdio"].append(round_trips(stdio, args.requests))
            stdio.close()
            server = Listening(empty)
            ws = server.connect()
            rates["websocket"].append(round_trips(ws, args.requests))
            ws.close()
            server.close()
        medians = {name: statistics.median(values) for name, values in rates.items()}
        for name, value in medians.items():
            say(f"  {name:9} {value:8.0f} requests/s (median)")

        say("paging the whole history back, 50 messages a page")
        sessions = root / "sessions"
        write_session(SessionStore(sessions), str(root), random.Random(7))
        paging: dict[str, dict[str, float]] = {}
        stdio = StdioPeer(sessions)
        seconds, received, records = page_everything(stdio)
        stdio.close()
        paging["stdio"] = {"seconds": seconds, "bytes": received, "records": records}
        server = Listening(sessions)
        for compression in (False, True):
            ws = server.connect(compression=compression)
            seconds, received, records = page_everything(ws)
            name = "websocket-deflate" if ws.compressed else "websocket"
            ws.close()
            paging[name] = {"seconds": seconds, "bytes": received, "records": records}
        server.close()
        for name, figures in paging.items():
            say(
                f"  {name:18} {figures['seconds'] * 1000:7.0f} ms  "
                f"{figures['bytes'] / 1e6:7.2f} MB received  {figures['records']:.0f} records"
            )
    result = {
        "requests": args.requests,
        "rounds": args.rounds,
        "round_trips_per_s": {k: round(v) for k, v in medians.items()},
        "websocket_vs_stdio_rate": round(medians["websocket"] / medians["stdio"], 3),
        "paging": {
            k: {"ms": round(v["seconds"] * 1000, 1), "bytes": int(v["bytes"])}
            for k, v in paging.items()
        },
    }
    print("WEBSOCKET_PERF_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
