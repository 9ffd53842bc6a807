"""What reading a huge broken log costs: `session/list` and `acp-server log` over 1 GiB logs.

Two sparse 1 GiB logs under one sessions root (cheap to make, no disk used): one holding only
NUL bytes (no header line at all), one with a valid header followed by a 1 GiB torn tail (no
newline). Each command runs in a fresh process; its wall time and peak resident memory
(`ru_maxrss` from `wait4`) are measured:

- `session/list` through `acp-server serve` (both logs are skipped as unreadable);
- `acp-server log verify|stats|cat` on each log (each refuses or reports it).

Reading within bounds means the peak memory stays far below the file size, whatever its size.
Human-readable lines go to stderr; stdout gets exactly one line, `BOUNDED_READS_RESULT {json}`.

Run from the repository root: `python benchmarks/bounded_reads.py [--size-mib N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HEADER = {"type": "session", "version": 2, "id": "torn", "createdAt": 0, "cwd": "/w"}


def make_logs(sessions: Path, size: int) -> dict[str, Path]:
    paths = {}
    for name, head in (("nuls", b""), ("torn", json.dumps(HEADER).encode() + b"\n")):
        path = sessions / name / "session.jsonl"
        path.parent.mkdir(parents=True)
        path.write_bytes(head)
        os.truncate(path, size)  # sparse: the rest reads as NUL bytes
        paths[name] = path
    return paths


def peak_of_child(argv: list[str], stdin: bytes = b"") -> tuple[float, int]:
    """Wall seconds and peak RSS (MiB) of one fresh process, from `wait4` on its pid."""
    read_end, write_end = os.pipe()
    os.write(write_end, stdin)
    os.close(write_end)
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child: stdin from the pipe, output discarded
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(read_end, 0)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.execv(sys.executable, [sys.executable, *argv])
    os.close(read_end)
    _, _, usage = os.wait4(pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss // 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024, help="each log's size (1024)")
    args = parser.parse_args()
    size = args.size_mib << 20
    result: dict[str, object] = {"log_mib": args.size_mib}
    with tempfile.TemporaryDirectory() as tmp:
        sessions = Path(tmp) / "sessions"
        logs = make_logs(sessions, size)
        frames = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}},
        ]
        requests = b"".join(json.dumps(f).encode() + b"\n" for f in frames)
        serve = ["-m", "acp_server", "serve", "--sessions-dir", str(sessions)]
        seconds, peak = peak_of_child(serve, requests)
        result["session_list"] = {"seconds": round(seconds, 2), "peak_rss_mib": peak}
        print(f"session/list: {seconds:.2f} s, peak RSS {peak} MiB", file=sys.stderr)
        for name, path in logs.items():
            for action in ("verify", "stats", "cat"):
                argv = ["-m", "acp_server", "log", action, str(path)]
                seconds, peak = peak_of_child(argv)
                result[f"log_{action}_{name}"] = {
                    "seconds": round(seconds, 2),
                    "peak_rss_mib": peak,
                }
                print(f"log {action} {name}: {seconds:.2f} s, peak RSS {peak} MiB", file=sys.stderr)
    print("BOUNDED_READS_RESULT " + json.dumps(result, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
