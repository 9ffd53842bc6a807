"""List: the first page of `session/list` over 100,000 sessions, in a fresh server process.

A store of `--sessions` sessions (100,000: headers only, spread over 100 working directories,
each created at its own millisecond) is made on each engine, then fresh
`python -m acp_server serve --store URL` processes are spawned, and each is asked, after
`initialize`, for one page as its first request: alternately the first page of the whole list
and the first page of one working directory (1/100 of the sessions), then the page after it (by
the first answer's cursor). `initialize` is answered while the server is still starting, so a
request of no method (answered -32601 once it has started, its store prepared) comes before
the list: the list's own time in a fresh process is measured from just before its request is
written to its answer (`firstPageMs`, `cwdPageMs`, `nextPageMs`); from just before the spawn,
`spawnToReadyMs` (the server started) and `spawnToFirstPageMs`, `spawnToCwdPageMs`.
Every page is checked: 100 sessions, newest first, exactly those expected.

The stores are filled fast, with nothing the list reads left out: JSONL through the store API's
`create` (so its list index is appended as a server would append it), with `os.fsync` skipped in
this process while filling (durability is not measured here, and 100,000 synced creates take
half an hour on this machine's disk); SQLite with the engine's own insert of a new session, all
in one transaction; PostgreSQL with the same insert as `create`, in one transaction. On JSONL,
`rebuildMs` is how long a list page takes in process when the index is missing (a root written by
another build): every header read once, and the index written.

PostgreSQL is the database `--postgres URL` names (an empty one), or else a throwaway cluster
started as the tests start theirs (`tests/postgres_server.py`), or left out when there is none.

Run from the repository root: `python benchmarks/list.py [--sessions N] [--rounds N]
[--postgres URL]`. Human-readable lines go to stderr; stdout gets exactly one line,
`LIST_RESULT {json}`. `--compare DIR` adds JSONL rounds of the server from another checkout
(its root put first on `PYTHONPATH`), reported under `compared`: a build without the list
index reads every session to answer a page (its pages may hold fewer sessions).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from store import postgres_database  # noqa: E402

from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader  # noqa: E402
from acp_server.storage.jsonl.list_index import INDEX_NAME  # noqa: E402
from acp_server.storage.jsonl.store import JsonlStore  # noqa: E402
from acp_server.storage.sql import common, sqlite  # noqa: E402

PAGE = 100
DIRECTORIES = 100
TIMEOUT_S = 120.0
GOAL_FIRST_PAGE_MS = 200
CREATED_AT = 1_700_000_000_000
INITIALIZE = {"protocolVersion": 1, "clientCapabilities": {}}


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def headers(count: int) -> list[SessionHeader]:
    """The sessions, oldest first: session n in directory n % 100, created at its own ms."""
    return [
        SessionHeader(
            version=SESSION_FORMAT_VERSION,
            id=f"s{n:07d}",
            created_at=CREATED_AT + n,
            cwd=f"/work/project-{n % DIRECTORIES:02d}",
        )
        for n in range(count)
    ]


@contextlib.contextmanager
def no_fsync() -> Iterator[None]:
    real = os.fsync
    os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


async def fill_jsonl(root: Path, made: list[SessionHeader]) -> None:
    store = JsonlStore(root)
    await store.prepare()
    await store.list_page(None, None, 1, "exclude")  # the index of the empty root
    limiter = anyio.CapacityLimiter(8)

    async def create(header: SessionHeader) -> None:
        async with limiter:
            await (await store.create(header)).close()

    with no_fsync():
        for start in range(0, len(made), 5000):
            async with anyio.create_task_group() as group:
                for header in made[start : start + 5000]:
                    group.start_soon(create, header)
            log(f"jsonl: {min(start + 5000, len(made)):,} sessions")
    await store.aclose()


def fill_sqlite(path: Path, made: list[SessionHeader]) -> None:
    sqlite.SqliteStore(path).close()  # the schema
    db = sqlite.connect(path)
    try:
        with sqlite.transaction(db):
            for header in made:
                sqlite._insert_session(db, header)
    finally:
        db.close()


def fill_postgres(url: str, made: list[SessionHeader]) -> None:
    import msgspec
    import psycopg

    from acp_server.storage.sql.postgres import PostgresStore

    async def schema() -> None:
        store = PostgresStore(url)
        await store.prepare()
        await store.aclose()

    anyio.run(schema)
    encoder = msgspec.json.Encoder()
    rows = [(h.id, encoder.encode(h).decode(), h.created_at, *common.list_columns(h)) for h in made]
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO acp_sessions (id, header, created_at, next_seq, epoch, cwd, origin) "
            "VALUES (%s, %s::json, %s, 0, 1, %s, %s)",
            rows,
        )


async def rebuild_ms(root: Path) -> float:
    (root / INDEX_NAME).unlink()
    store = JsonlStore(root)
    started = time.perf_counter()
    await store.list_page(None, None, PAGE, "exclude")
    elapsed = time.perf_counter() - started
    await store.aclose()
    return elapsed * 1000


class Server:
    def __init__(self, url: str, cwd: Path, checkout: Path | None = None) -> None:
        env = dict(os.environ)
        if checkout is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(checkout), env.get("PYTHONPATH", "")])
        self.started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "serve", "--store", url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            bufsize=0,
        )
        self.next_id = 0

    def ask(
        self, method: str, params: dict[str, Any], *, error: bool = False
    ) -> tuple[float, dict[str, Any]]:
        """Seconds from writing the request to reading its answer, and the answer's result
        (its error, when `error` says one is expected)."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        started = time.perf_counter()
        self.process.stdin.write(json.dumps(frame).encode() + b"\n")
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed its output before answering {method}")
            answer = json.loads(line)
            if answer.get("id") == self.next_id and "method" not in answer:
                break
        elapsed = time.perf_counter() - started
        if error and "error" in answer:
            failed: dict[str, Any] = answer["error"]
            return elapsed, failed
        if "result" not in answer:
            raise RuntimeError(f"{method}: {answer}")
        result: dict[str, Any] = answer["result"]
        return elapsed, result

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def check(result: dict[str, Any], expected: list[str], what: str) -> None:
    """The page is the expected one (another checkout's pages may be shorter)."""
    got = [s["sessionId"] for s in result["sessions"]]
    if not got or got != expected[: len(got)]:
        raise RuntimeError(f"{what}: got {got[:3]}... expected {expected[:3]}...")


def rounds(
    url: str, count: int, sessions: int, workspace: Path, checkout: Path | None = None
) -> dict[str, Any]:
    newest = [f"s{n:07d}" for n in reversed(range(sessions))]
    directory = 7
    in_directory = [s for s in newest if int(s[1:]) % DIRECTORIES == directory]
    cwd = f"/work/project-{directory:02d}"
    measured: dict[str, list[float]] = {
        "spawnToReadyMs": [],
        "firstPageMs": [],
        "spawnToFirstPageMs": [],
        "nextPageMs": [],
        "cwdPageMs": [],
        "spawnToCwdPageMs": [],
    }
    for n in range(count + 1):  # round 0 warms the bytecode cache and the page cache
        server = Server(url, workspace, checkout)
        try:
            server.ask("initialize", INITIALIZE)  # answered early, while the server starts
            # Answered once the server has started (its store prepared): what follows is the
            # list's own time in a fresh process.
            server.ask("$/ready", {}, error=True)
            ready = time.perf_counter() - server.started
            if n % 2 == 0:
                elapsed, first = server.ask("session/list", {})
                spawned = time.perf_counter() - server.started
                check(first, newest[:PAGE], "first page")
                later, second = server.ask("session/list", {"cursor": first["nextCursor"]})
                shown = len(first["sessions"])
                check(second, newest[shown : 2 * shown], "next page")
                keys = ("spawnToReadyMs", "firstPageMs", "spawnToFirstPageMs", "nextPageMs")
                values = (ready, elapsed, spawned, later)
            else:
                elapsed, page = server.ask("session/list", {"cwd": cwd})
                spawned = time.perf_counter() - server.started
                check(page, in_directory[:PAGE], "cwd page")
                keys = ("spawnToReadyMs", "cwdPageMs", "spawnToCwdPageMs")
                values = (ready, elapsed, spawned)
        finally:
            server.close()
        if n > 0:
            for key, value in zip(keys, values, strict=True):
                measured[key].append(value * 1000)
    return {key: round(statistics.median(v), 1) for key, v in measured.items() if v} | {
        "rounds": {key: [round(x, 1) for x in v] for key, v in measured.items()}
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=6, help="fresh servers per engine")
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database")
    parser.add_argument("--engines", default="jsonl,sqlite,postgresql")
    parser.add_argument(
        "--compare",
        metavar="DIR",
        type=Path,
        help="also run the JSONL rounds with the server of another checkout (its root first "
        "on PYTHONPATH)",
    )
    parser.add_argument("--compare-rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(
            "--rounds: at least 2 (the fresh servers take turns at the first page and a cwd's)"
        )
    wanted = args.engines.split(",")
    made = headers(args.sessions)
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="acp-list-bench-") as scratch:
        root = Path(scratch)
        workspace = root / "workspace"
        workspace.mkdir()
        database, cluster = (
            postgres_database(args.postgres) if "postgresql" in wanted else (None, None)
        )
        try:
            engines: list[tuple[str, str]] = []
            if "jsonl" in wanted:
                started = time.perf_counter()
                anyio.run(fill_jsonl, root / "jsonl", made)
                log(f"jsonl: filled in {time.perf_counter() - started:.1f} s")
                engines.append(("jsonl", str(root / "jsonl")))
            if "sqlite" in wanted:
                fill_sqlite(root / "sessions.db", made)
                engines.append(("sqlite", f"sqlite://{root}/sessions.db"))
            if database is not None:
                fill_postgres(database, made)
                engines.append(("postgresql", database))
            for name, url in engines:
                results[name] = rounds(url, args.rounds, args.sessions, workspace)
                shown = {k: v for k, v in results[name].items() if k != "rounds"}
                log(f"{name:<10} {shown}")
                if name == "jsonl" and args.compare is not None:
                    compared = rounds(
                        url, args.compare_rounds, args.sessions, workspace, args.compare
                    )
                    results[name]["compared"] = compared | {"checkout": str(args.compare)}
                    shown = {k: v for k, v in compared.items() if k != "rounds"}
                    log(f"compared   {shown}")
            if "jsonl" in wanted:
                results["jsonl"]["rebuildMs"] = round(anyio.run(rebuild_ms, root / "jsonl"), 1)
                log(f"jsonl      rebuild of a missing index {results['jsonl']['rebuildMs']} ms")
        finally:
            if cluster is not None:
                cluster.stop()
    met = {
        name: max(r["firstPageMs"], r["cwdPageMs"]) < GOAL_FIRST_PAGE_MS
        for name, r in results.items()
    }
    load = os.getloadavg()[0]
    print(
        "LIST_RESULT "
        + json.dumps(
            {
                "sessions": args.sessions,
                "pageSize": PAGE,
                "engines": results,
                "goalFirstPageMs": GOAL_FIRST_PAGE_MS,
                "met": met,
                "loadAverage": round(load, 2),
            },
            separators=(",", ":"),
        ),
        flush=True,
    )
    return 0 if all(met.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
