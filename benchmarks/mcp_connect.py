"""MCP servers and `session/new`: how long a session's answer waits when one of its servers hangs.

An editor passes its MCP servers with every `session/new`; one that never answers (a server
that hangs at start, a remote one behind a dead network) must not hold the thread. Each round
spawns a fresh `python -m acp_server serve --sessions-dir D`, answers `initialize`, and times,
from the request to its answer, two `session/new` in a row: the process's first session and
its second. Rounds alternate between no MCP servers and one stdio server that never answers (a
Python process that sleeps). The first session of a process also pays for loading the session
machinery, so compare it with the first session without servers, in the same run.

`--compare DIR` adds the same rounds for the server of another checkout (its root first on
`PYTHONPATH`), to measure a change before and after on one machine in one run.

Run from the repository root: `python benchmarks/mcp_connect.py [--rounds N] [--compare DIR]`.
Human-readable lines go to stderr; stdout gets exactly one line, `MCP_CONNECT_PERF_RESULT {json}`.
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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
HUNG = {
    "name": "hung",
    "command": sys.executable,
    "args": ["-c", "import time; time.sleep(3600)"],
    "env": [],
}
"""A stdio MCP server that never answers its `initialize`."""


def _read_answer(process: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert process.stdout is not None
    while True:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the server ended before answering request {request_id}")
        frame = json.loads(line)
        if frame.get("id") == request_id and "method" not in frame:
            if "result" not in frame:
                raise RuntimeError(f"request {request_id} failed: {frame}")
            result: dict[str, Any] = frame["result"]
            return result


def _send(process: subprocess.Popen[bytes], request_id: int, method: str, params: Any) -> None:
    assert process.stdin is not None
    frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    process.stdin.write(json.dumps(frame).encode() + b"\n")
    process.stdin.flush()


def one_round(root: Path, servers: list[dict[str, Any]]) -> tuple[float, float]:
    """Milliseconds to the answers of a fresh server's first and second `session/new`."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory() as scratch:
        command = [sys.executable, "-m", "acp_server", "serve", "--sessions-dir", scratch]
        process = subprocess.Popen(
            command,
            cwd=scratch,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        try:
            _send(process, 1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            _read_answer(process, 1)
            times = []
            for request_id in (2, 3):
                start = time.perf_counter()
                _send(process, request_id, "session/new", {"cwd": scratch, "mcpServers": servers})
                _read_answer(process, request_id)
                times.append((time.perf_counter() - start) * 1000)
        finally:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--compare", type=Path, help="another checkout's root, measured beside")
    args = parser.parse_args()
    checkouts = {"this": ROOT}
    if args.compare is not None:
        checkouts["compare"] = args.compare.resolve()
    samples: dict[str, list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for name, root in checkouts.items():
            for label, servers in (("none", []), ("hung", [HUNG])):
                first, second = one_round(root, servers)
                samples.setdefault(f"{name}.{label}", []).append((first, second))
                print(f"{name} {label}: {first:.0f} ms, then {second:.0f} ms", file=sys.stderr)
    result = {
        key: {
            "first_ms": round(statistics.median(first for first, _ in values), 1),
            "second_ms": round(statistics.median(second for _, second in values), 1),
        }
        for key, values in samples.items()
    }
    print("MCP_CONNECT_PERF_RESULT " + json.dumps({"rounds": args.rounds, **result}))


if __name__ == "__main__":
    main()
