"""ACP v2 `session/resume` from the start of a huge session, against v1's whole `session/load`.

The session is `huge.py`'s (same shape, fixed seed), written through each engine's writer. Then,
each in a fresh `acp-server serve --store URL` over stdio:

- v2 resume: `initialize` for version 2, then `session/resume` with `replayFrom: {"type":
  "start"}`: the time from the spawn to its answer (the thread loaded) and from the request, the updates before it and their bytes,
  and the server's peak RSS (`VmHWM`, read after the answer). The replay is read in pages
  (`ACP_SERVER_REPLAY_PAGE` events, 200 by default) of whole turns, each sent before the next
  is read;
- v1 load: `session/load` without a tail (the whole log replayed), the same figures.

Run from the repository root:
`python benchmarks/v2_resume.py [--engines jsonl,sqlite,postgresql] [--size-mib 64]
[--events 40000]`. Human-readable lines go to stderr; stdout gets exactly one line,
`V2_RESUME_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from huge import (  # noqa: E402
    SEED,
    SESSION_ID,
    Server,
    engine_places,
    log,
    plan_session,
    write_session,
)
from store import postgres_database, store_bytes  # noqa: E402

MIB = 1024 * 1024


def replay(url: str, env: dict[str, str], cwd: str, version: int) -> dict[str, Any]:
    """One replay of the whole session in a fresh server: v2's resume or v1's load."""
    server = Server(url, env, cwd)
    try:
        if version == 2:
            server.call("initialize", {"protocolVersion": 2, "info": {"name": "b", "version": "0"}})
            method = "session/resume"
            params: dict[str, Any] = {
                "sessionId": SESSION_ID,
                "cwd": cwd,
                "replayFrom": {"type": "start"},
            }
        else:
            server.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            method = "session/load"
            params = {"sessionId": SESSION_ID, "cwd": cwd, "mcpServers": []}
        elapsed, _, before = server.call(method, params)
        from_spawn = time.perf_counter() - server.spawned
        rss = server.peak_rss_bytes()
        server.close()
    finally:
        if server.process.poll() is None:
            server.process.kill()
            server.process.wait()
    return {
        "fromSpawnMs": round(from_spawn * 1000, 1),
        "requestMs": round(elapsed * 1000, 1),
        "updates": before.frames,
        "updateBytes": before.bytes,
        "peakRssMB": round(rss / 1e6, 1),
    }


def engine_run(name: str, url: str, where: Path | str, args: argparse.Namespace, root: Path) -> Any:
    cwd = root / "workspace"
    cwd.mkdir(exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), env.get("PYTHONPATH")]))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    session = plan_session(args.size_mib, args.events, args.seed)
    written_s = anyio.run(write_session, url, session, args.seed, str(cwd))
    log(f"{name:<10} written in {written_s:.1f} s, {store_bytes(where) / MIB:,.1f} MiB stored")
    replay(url, env, str(cwd), 2)  # the bytecode, cached
    result = {"v2Resume": replay(url, env, str(cwd), 2), "v1Load": replay(url, env, str(cwd), 1)}
    log(f"{name:<10} {result}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engines", default="jsonl,sqlite,postgresql")
    parser.add_argument("--size-mib", type=int, default=64)
    parser.add_argument("--events", type=int, default=40_000)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.engines.split(",") if n.strip()]
    unknown = set(names) - {"jsonl", "sqlite", "postgresql"}
    if unknown:
        parser.error(f"unknown engines: {', '.join(sorted(unknown))}")
    root = Path(tempfile.mkdtemp(prefix="acp-v2-resume-bench-"))
    results: dict[str, Any] = {}
    cluster = None
    try:
        database = None
        if "postgresql" in names:
            database, cluster = postgres_database(args.postgres)
        for name, url, where in engine_places(root, names, database):
            results[name] = engine_run(name, url, where, args, root)
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(root, ignore_errors=True)
    summary = {"sizeMiB": args.size_mib, "events": args.events}
    print("V2_RESUME_RESULT " + json.dumps({"session": summary, **results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
