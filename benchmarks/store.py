"""Store engines side by side: the 417,220-event history on JSONL, SQLite and PostgreSQL, in one
run.

The session is `history_transport.py`'s (`codec.build_session`, fixed seed): 116 turns, one
streamed step each, 416,176 text deltas. It is written once as a JSONL log (the loop's flush
batches) and used as the `--replay` fixture; then, for each engine, through the real server
(`python -m acp_server serve --store URL`, over stdio; `--replay FIXTURE` for the stream):

- stream: one `session/new` and 116 `session/prompt`s replaying every turn at full speed, each
  chunk streamed to the client as a `session/update` and stored by the loop (flushed every
  100 ms, synced at each step and turn end): chunks per second of wall time, from the first
  prompt sent to the last response read;
- cold newest page: `session.page` of the newest 50 messages as the first request of a fresh
  server;
- load: `session/load` in a fresh server, from the request to its response (every replayed
  update read), and with the newest 50 messages only (`_meta` replay tail);
- whole history: `session.page` of every message in a fresh server (once);
- follow latency: another process appends one event per batch (200, 10 ms apart) to a session
  this process follows with `follow_stored`: from the writer's clock just before its flush to
  this process holding the event, p50 and p99 (files and SQLite poll every 50 ms, PostgreSQL
  is notified);
- bytes: the store's size on disk once every server has exited (JSONL: the session's log;
  SQLite: the database file with its WAL and lock directory; PostgreSQL: the store's tables
  with their indexes and TOAST).

A fresh server is timed once it has started: acp-server answers `initialize` while it is still
starting when its store is a directory (`acp_server.startup.handshake`), and only once it has
started on a database. So each fresh server is first sent a request only the started server
answers (an unknown method, answered -32601, as `load.py` does); timed from `initialize` on, a
JSONL figure would hold the rest of the server's start and a database's would not.

Once every engine holds its session, the page and the loads are read in `--processes` rounds,
the engines taking turns within each round (each engine's figure is the median of its rounds):
on a shared machine, load from other jobs then weighs on every engine alike, where one fresh
server per engine, engine after engine, let a quiet minute for one and a busy one for another
swing a ratio by several times between runs.

PostgreSQL is the database `--postgres URL` names (an empty one), or else a throwaway cluster
started as the tests start theirs (`tests/postgres_server.py`), or left out when there is none.

Goals (issue 15): SQLite's cold newest page and load within 1.5x of JSONL's; at least 50,000
chunks/s streamed on SQLite. Issue 18: PostgreSQL's within 2x of JSONL's, at least 30,000
chunks/s.

Run from the repository root: `python benchmarks/store.py [--processes N] [--postgres URL]`. Human-readable lines
go to stderr; stdout gets exactly one line, `STORE_PERF_RESULT {json}`.
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

import anyio
import msgspec

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from codec import SEED, build_session  # noqa: E402
from history_transport import flush_batches  # noqa: E402

from acp_server.core.events import AssistantChunk, SessionEvent, TurnStart  # noqa: E402
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader  # noqa: E402
from acp_server.storage.jsonl.store import JsonlStore  # noqa: E402

NEWEST = 50
WHOLE = 2**31
GOALS = {
    "sqliteColdPageToJsonl": 1.5,
    "sqliteLoadToJsonl": 1.5,
    "sqliteChunksPerSecond": 50_000,
    "postgresqlColdPageToJsonl": 2.0,
    "postgresqlLoadToJsonl": 2.0,
    "postgresqlChunksPerSecond": 30_000,
    "postgresqlFollowP99Ms": 100,
}


def log(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


async def write_fixture(root: Path, events: list[SessionEvent]) -> Path:
    store = JsonlStore(root)
    header = SessionHeader(
        version=SESSION_FORMAT_VERSION, id="fixture", created_at=events[0].time, cwd="/bench"
    )
    writer = await store.create(header)
    for batch in flush_batches(events):
        writer.append(batch)
        await writer.flush()
    await writer.close()
    return root / "fixture" / "session.jsonl"


class Server:
    """`acp-server serve` over stdio, driven one request at a time."""

    def __init__(self, store: str, fixture: Path | None = None) -> None:
        replay = ["--replay", str(fixture)] if fixture is not None else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "serve", "--store", store, *replay],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        )
        self.next_id = 0
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    def started(self) -> None:
        """Wait until the server has started (see the module's docstring)."""
        self.request("acp-bench/started", {}, error=True)

    def request(self, method: str, params: Any, *, error: bool = False) -> tuple[float, Any, int]:
        """Seconds from the request to its response, its result (its error, if `error`), and
        the notifications read."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        start = time.perf_counter()
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        self.process.stdin.flush()
        notifications = 0
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise SystemExit(f"{method}: the server exited")
            if b'"id"' in line[:40] or b'"result"' in line or b'"error"' in line:
                reply = msgspec.json.decode(line)
                if reply.get("id") == self.next_id and "method" not in reply:
                    break
            notifications += 1
        elapsed = time.perf_counter() - start
        if error and "error" in reply:
            return elapsed, reply["error"], notifications
        if "result" not in reply:
            raise SystemExit(f"{method} failed: {line[:300]!r}")
        return elapsed, reply["result"], notifications

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=120)


def store_bytes(path: Path | str) -> int:
    if isinstance(path, str):  # a database server's: its tables, indexes and TOAST
        import psycopg

        with psycopg.connect(path) as conn:
            row = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                "WHERE c.relkind = 'r' AND c.relname LIKE 'acp\\_%'"
            ).fetchone()
        return int(row[0]) if row and row[0] is not None else 0
    if path.is_file():
        return sum(p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name))
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def stream_into(
    name: str, url: str, fixture: Path, turns: list[str], chunks: int, workspace: Path
) -> tuple[str, dict[str, Any]]:
    """Stream the session into an engine's store through a server: its id and the figures."""
    workspace.mkdir(parents=True, exist_ok=True)
    server = Server(url, fixture)
    try:
        _, created, _ = server.request("session/new", {"cwd": str(workspace), "mcpServers": []})
        session = created["sessionId"]
        start = time.perf_counter()
        for prompt in turns:
            blocks = [{"type": "text", "text": prompt}]
            server.request("session/prompt", {"sessionId": session, "prompt": blocks})
        stream_s = time.perf_counter() - start
    finally:
        server.close()
    result = {"streamSeconds": round(stream_s, 2), "chunksPerSecond": round(chunks / stream_s)}
    log(f"{name:<10} " + "  ".join(f"{k} {v}" for k, v in result.items()))
    return session, result


def fresh(url: str, method: str, params: Any) -> tuple[float, Any]:
    """One request, timed, to a fresh server once it has started."""
    server = Server(url)  # the bundled demo recording, read only if a session goes live
    try:
        server.started()
        elapsed, result, _ = server.request(method, params)
    finally:
        server.close()
    return elapsed, result


class Reads:
    """What fresh servers read of one engine's session, a round at a time."""

    def __init__(self, url: str, session: str, workspace: Path) -> None:
        self.url = url
        self.address = {"kind": "session", "sessionId": session}
        self.load_params = {"sessionId": session, "cwd": str(workspace), "mcpServers": []}
        # The last seq: the cursor of a follow's snapshot.
        _, probe = fresh(url, "session.follow", {"address": self.address, "maxMessages": 1})
        self.last_seq: int = probe["cursor"]
        self.times: dict[str, list[float]] = {"page": [], "load": [], "tail": []}

    def round(self) -> None:
        """A cold newest page, a load and a tail load, each in a fresh server."""
        page = {"address": self.address, "throughSeq": self.last_seq, "maxMessages": NEWEST}
        self.times["page"].append(fresh(self.url, "session.page", page)[0])
        self.times["load"].append(fresh(self.url, "session/load", self.load_params)[0])
        tail = {**self.load_params, "_meta": {"acp-server": {"replay": {"maxMessages": NEWEST}}}}
        self.times["tail"].append(fresh(self.url, "session/load", tail)[0])

    def result(self) -> dict[str, Any]:
        """The medians of the rounds, and the whole history (one more fresh server)."""
        page = {"address": self.address, "throughSeq": self.last_seq, "maxMessages": WHOLE}
        whole_s, whole = fresh(self.url, "session.page", page)

        def ms(key: str) -> float:
            return round(statistics.median(self.times[key]) * 1000, 1)

        return {
            "events": self.last_seq + 1,
            "coldNewestPageMs": ms("page"),
            "loadMs": ms("load"),
            "loadTail50Ms": ms("tail"),
            "rounds": len(self.times["load"]),
            "loadRunsMs": [round(t * 1000, 1) for t in self.times["load"]],
            "wholeHistoryMs": round(whole_s * 1000, 1),
            "wholeHistoryRecords": len(whole["records"]),
        }


LATENCY_WRITER = """
import sys, time, anyio
from acp_server.core.events import SessionTitle, SessionTitleData
from acp_server.storage.url import open_store, parse_store_url

async def main():
    store = open_store(parse_store_url(sys.argv[1]))
    writer = (await store.open("latency", 0)).writer
    for k in range(int(sys.argv[2])):
        writer.append_one(SessionTitle(k, time.time_ns() // 1000, SessionTitleData(f"t{k}")))
        await writer.flush()
        await anyio.sleep(0.01)
    await writer.close()
    await store.aclose()

anyio.run(main)
"""
LATENCY_EVENTS = 200


async def follow_latency(url: str) -> dict[str, float]:
    """Append-to-follower latency across two processes (event times in microseconds here)."""
    from acp_server.storage.api import follow_stored
    from acp_server.storage.url import open_store, parse_store_url

    store = open_store(parse_store_url(url))
    try:
        header = SessionHeader(
            version=SESSION_FORMAT_VERSION, id="latency", created_at=0, cwd="/work"
        )
        await (await store.create(header)).close()
        latencies: list[float] = []
        async with anyio.create_task_group() as tasks:

            async def follow() -> None:
                async for batch in follow_stored(store, "latency", 0):
                    now = time.time_ns() // 1000
                    latencies.extend((now - e.time) / 1000 for e in batch)
                    if len(latencies) >= LATENCY_EVENTS:
                        tasks.cancel_scope.cancel()

            tasks.start_soon(follow)
            await anyio.run_process(
                [sys.executable, "-c", LATENCY_WRITER, url, str(LATENCY_EVENTS)],
                stdout=None,
                stderr=None,
            )
            with anyio.fail_after(60):
                await anyio.sleep_forever()
    finally:
        await store.aclose()
    cuts = statistics.quantiles(latencies, n=100)
    return {"followP50Ms": round(cuts[49], 1), "followP99Ms": round(cuts[98], 1)}


def postgres_database(given: str | None) -> tuple[str | None, Any]:
    """The database to run on, and the throwaway cluster to stop afterwards (or None)."""
    if given:
        return given, None
    sys.path.insert(0, str(HERE.parent / "tests"))
    from postgres_server import Cluster, fresh_database, server_binaries

    binaries = server_binaries()
    if binaries is None:
        log("postgresql: no server (give --postgres URL or install PostgreSQL): left out")
        return None, None
    cluster = Cluster(binaries)
    return fresh_database(cluster.start()), cluster


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--processes",
        type=int,
        default=3,
        help="rounds of fresh servers (a cold page, a load and a tail load each; default 3)",
    )
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database")
    args = parser.parse_args(argv)
    events = build_session(SEED)
    turns = [f"turn {e.data.turn}" for e in events if type(e) is TurnStart]
    chunk_count = sum(type(e) is AssistantChunk for e in events)
    log(f"session: {len(events):,} events, {chunk_count:,} chunks, {len(turns)} turns")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="acp-store-bench-") as scratch:
        root = Path(scratch)
        fixture = anyio.run(write_fixture, root / "fixture", events)
        engines: list[tuple[str, str, Path | str]] = [
            ("jsonl", str(root / "jsonl"), root / "jsonl"),
            ("sqlite", f"sqlite://{root}/sqlite/sessions.db", root / "sqlite" / "sessions.db"),
        ]
        (root / "sqlite").mkdir()
        database, cluster = postgres_database(args.postgres)
        try:
            if database is not None:
                engines.append(("postgresql", database, database))
            reads: dict[str, Reads] = {}
            for name, url, _ in engines:
                workspace = root / "workspaces" / name
                session, results[name] = stream_into(
                    name, url, fixture, turns, chunk_count, workspace
                )
                reads[name] = Reads(url, session, workspace)
            # The engines take turns, round by round: what else loads the machine meanwhile
            # weighs on each alike.
            for _ in range(args.processes):
                for name in reads:
                    reads[name].round()
            for name, url, where in engines:
                results[name].update(reads[name].result())
                results[name]["bytesOnDisk"] = store_bytes(where)
                latency = anyio.run(follow_latency, url)
                results[name].update(latency)
                log(f"{name:<10} " + "  ".join(f"{k} {v}" for k, v in results[name].items()))
        finally:
            if cluster is not None:
                cluster.stop()
    jsonl = results["jsonl"]
    measured: dict[str, float] = {}
    met: dict[str, bool] = {}
    for name in [name for name in results if name != "jsonl"]:
        engine = results[name]
        measured[f"{name}ColdPageToJsonl"] = round(
            engine["coldNewestPageMs"] / jsonl["coldNewestPageMs"], 2
        )
        measured[f"{name}LoadToJsonl"] = round(engine["loadMs"] / jsonl["loadMs"], 2)
        measured[f"{name}ChunksPerSecond"] = engine["chunksPerSecond"]
    if "postgresql" in results:
        measured["postgresqlFollowP99Ms"] = results["postgresql"]["followP99Ms"]
    for key, value in measured.items():
        met[key] = value >= GOALS[key] if key.endswith("PerSecond") else value <= GOALS[key]
        log(f"goal {key}: {value} (goal {GOALS[key]}): {'met' if met[key] else 'MISSED'}")
    print(
        "STORE_PERF_RESULT "
        + json.dumps({**results, "goals": GOALS, "measured": measured, "met": met})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
