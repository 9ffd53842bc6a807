"""Requests per second for sequential JSON-RPC round trips over a real stdio pipe.

Spawns acp-server (`python -m acp_server serve`, on an empty temporary sessions root) and a
minimal agent built on the official `agent-client-protocol` SDK (`benchmarks/sdk_agent.py`), and
drives both with the same client loop: write one request line, read the response line, repeat.
Measured rounds alternate between the two servers; each rate is the median of its rounds.
The request is cheap on both sides, so the figure measures the JSON-RPC stacks (framing, dispatch,
validation, encoding, scheduling), not the work behind a method.

`initialize` (the default) is answered inline by acp-server (its handler never waits).
`session/list` goes through the path every waiting handler takes (a task per request, with
its cancel scope); note that acp-server's listing really looks at its sessions root, while the
SDK agent's returns a constant. acp-server runs on uvloop when it is installed (a dependency on
Linux and macOS); the SDK agent runs on asyncio's own loop, as `acp.run_agent` does.

Run: `python benchmarks/rpc.py [--requests N] [--rounds R] [--method initialize|session/list]`.
Prints a human summary on stderr and one line `RPC_PERF_RESULT {json}` on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent

REQUESTS = {
    "initialize": {
        "protocolVersion": 1,
        "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
    },
    "session/list": {},
}


def _spawn(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    # stderr to /dev/null, not a pipe nobody reads: a chatty child would otherwise block.
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        bufsize=0,
    )


def _round_trips(
    stdin: IO[bytes], stdout: IO[bytes], method: str, params: Any, first_id: int, count: int
) -> float:
    """The client loop, identical for both servers; returns the elapsed seconds."""
    lines = [
        json.dumps(
            {"jsonrpc": "2.0", "id": first_id + i, "method": method, "params": params},
            separators=(",", ":"),
        ).encode()
        + b"\n"
        for i in range(count)
    ]
    write, readline = stdin.write, stdout.readline
    started = time.perf_counter()
    for line in lines:
        write(line)
        answer = readline()
        if not answer:
            raise RuntimeError("the server closed its output")
    elapsed = time.perf_counter() - started
    last = json.loads(answer)
    if "result" not in last or last.get("id") != first_id + count - 1:
        raise RuntimeError(f"unexpected answer: {answer[:200]!r}")
    return elapsed


class Server:
    """One spawned server and the client end of its pipes."""

    def __init__(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.process = _spawn(command, env)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin = self.process.stdin
        self.stdout = os.fdopen(
            self.process.stdout.fileno(), "rb", buffering=1 << 16, closefd=False
        )
        self.next_id = 0
        self.rates: list[float] = []

    def run(self, method: str, count: int, record: bool) -> None:
        elapsed = _round_trips(
            self.stdin, self.stdout, method, REQUESTS[method], self.next_id, count
        )
        self.next_id += count
        if record:
            self.rates.append(count / elapsed)

    def close(self) -> None:
        self.stdin.close()
        self.process.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--requests", type=int, default=5000, help="round trips per round (default 5000)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=7,
        help="rounds per server, alternating; the median counts (default 7)",
    )
    parser.add_argument(
        "--warmup", type=int, default=1000, help="round trips before measuring (default 1000)"
    )
    parser.add_argument("--method", choices=sorted(REQUESTS), default="initialize")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="acp-rpc-bench-") as root:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(HERE.parent), env.get("PYTHONPATH", "")])
        )
        servers = [
            Server(
                "acp-server",
                [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", root],
                env,
            ),
            Server("sdk", [sys.executable, str(HERE / "sdk_agent.py")], env),
        ]
        try:
            for server in servers:
                server.run(args.method, args.warmup, record=False)
            # Rounds alternate between the two servers, so that a change in the machine's load
            # during the run weighs on both alike.
            for _ in range(args.rounds):
                for server in servers:
                    server.run(args.method, args.requests, record=True)
        finally:
            for server in servers:
                server.close()
    ours = {
        "rps": statistics.median(servers[0].rates),
        "rps_rounds": [round(r, 1) for r in servers[0].rates],
    }
    sdk = {
        "rps": statistics.median(servers[1].rates),
        "rps_rounds": [round(r, 1) for r in servers[1].rates],
    }
    ratio = ours["rps"] / sdk["rps"]
    result = {
        "benchmark": "rpc",
        "method": args.method,
        "requests_per_round": args.requests,
        "rounds": args.rounds,
        "acp_server_rps": round(ours["rps"], 1),
        "sdk_rps": round(sdk["rps"], 1),
        "ratio": round(ratio, 2),
        "goal_ratio": 2.0,
        "acp_server_rounds": ours["rps_rounds"],
        "sdk_rounds": sdk["rps_rounds"],
        "python": sys.version.split()[0],
    }
    print(
        f"{args.method}: acp-server {ours['rps']:,.0f} req/s, SDK agent {sdk['rps']:,.0f} req/s, ratio {ratio:.2f}",
        file=sys.stderr,
    )
    print("RPC_PERF_RESULT " + json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
