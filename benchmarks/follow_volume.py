"""Follow volume: what streaming sessions ask of one PostgreSQL server, and what following them
through NOTIFY or logical decoding can take (the figures behind docs/scale.md).

On a throwaway cluster started as the tests start theirs (`tests/postgres_server.py`), with
`wal_level=logical` (or the empty database `--postgres URL` names, whose server must have it for
the decoding figures), in five parts:

- turn: one streamed turn through the real server (`serve --store URL --replay FIXTURE
  --pace-ms P`: `--chunks` text deltas of 1 to 8 characters, one every P ms, as `stream.py`'s
  fixture), stored by the loop as it stores any turn (a flush every 100 ms, a sync at each step
  and turn end). A connection of this process listens on the store's channel (`acp_appends`),
  which every committed batch notifies once: the notifications counted are the turn's commits.
  Reported: commits per second of the turn's wall time, events, the stored JSON bytes per event
  (the records' text as written), WAL bytes per commit and per event (`pg_current_wal_lsn`
  before the prompt and after its response);
- volume: `--writers` sessions in this process, each committing `--commits` batches of the turn's
  mean events per commit (text deltas) through the store's own writer (`flush`, an asynchronous
  commit, as the loop's): commits per second this one process reached (bound by its own CPU),
  and WAL bytes per commit over many commits;
- flush: `pgbench` (`--clients` connections for `--seconds`, `synchronous_commit` off) replaying
  the writer's flush transaction on the store's tables over 10,000 sessions (the session's next
  seq moved under its epoch, one record as the volume part stored it): without a `pg_notify`,
  then with one while one and then `--listeners` connections (one per host of a fleet) listen
  on the store's channel: commits per second, WAL bytes per commit, and the fewest
  notifications a listener received of those committed (each listener gets every one); then a
  follower's wake-up replayed the same way (the engine's statements: the next seq, the last
  batch by seq, the next seq again, whether the session exists): wake-ups per second;
- decoding: all the WAL written from the turn on, read back through two logical replication
  slots created before it, each by one decoder (a backend of the server:
  `pg_logical_slot_get_changes`, timed): `test_decoding` (every row as text) and `pgoutput` with
  a publication of only the sessions table's `id` and `next_seq` updates (what a follower
  needs to know: a session has grown); commits and WAL bytes decoded per second, output bytes
  per commit;
- listener: one listener as the store's (`AsyncConnection.notifies`) draining
  `--notifications` notifications of distinct payloads queued by one transaction: how many a
  second one Python connection takes in.

`projected` multiplies the measured rates out to `--sessions` streaming sessions (10,000).

Run from the repository root: `python benchmarks/follow_volume.py [--postgres URL]`.
Human-readable lines go to stderr; stdout gets exactly one line, `FOLLOW_VOLUME_RESULT {json}`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent / "tests")]

import psycopg  # noqa: E402
from stream import ChunkCounter, Client, fragments, write_fixture  # noqa: E402

from acp_server.core.events import AssistantChunk, AssistantChunkData  # noqa: E402
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader  # noqa: E402
from acp_server.core.stream import TextDelta  # noqa: E402
from acp_server.storage.sql.common import Statements  # noqa: E402
from acp_server.storage.sql.postgres import PostgresStore  # noqa: E402
from acp_server.storage.sql.postgres_links import CHANNEL  # noqa: E402

SEED = 20260815
PUBLICATION = "acp_follow"
SLOTS = {"testDecoding": "acp_bench_text", "pgoutput": "acp_bench_pgoutput"}
BYTES_PER_MB = 1_000_000


def log(line: str = "") -> None:
    print(line, file=sys.stderr, flush=True)


def lsn(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn").fetchone()
    assert row is not None
    return int(row[0])


def drained(listener: psycopg.Connection[Any], wait_s: float = 1.0) -> list[str]:
    """The payloads of the notifications waiting on `listener` or arriving within `wait_s`."""
    return [note.payload for note in listener.notifies(timeout=wait_s)]


# ---------------------------------------------------------------------------------------------
# One streamed turn through the real server.


def turn_run(url: str, root: Path, chunks: int, pace_ms: int) -> dict[str, Any]:
    fixture = write_fixture(root / "fixture", fragments(SEED, chunks))
    workspace = root / "workspace"
    workspace.mkdir()
    replay = ["--replay", str(fixture), "--pace-ms", str(pace_ms)]
    with (
        psycopg.connect(url, autocommit=True) as conn,
        psycopg.connect(url, autocommit=True) as listener,
    ):
        listener.execute(f"LISTEN {CHANNEL}")
        process = subprocess.Popen(
            [sys.executable, "-m", "acp_server", "serve", "--store", url, *replay],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(HERE.parent)},
        )
        try:
            client = Client(process)
            client.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            created = client.call("session/new", {"cwd": str(workspace), "mcpServers": []})
            session = created["sessionId"]
            drained(listener, 0.2)
            row = conn.execute(
                "SELECT next_seq FROM acp_sessions WHERE id = %s", (session,)
            ).fetchone()
            assert row is not None
            seq_before = int(row[0])
            wal_before = lsn(conn)
            counter = ChunkCounter()
            prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "Write."}]}
            start = time.perf_counter()
            reply = client.until_response(client.send("session/prompt", prompt), counter)
            seconds = time.perf_counter() - start
            wal_after = lsn(conn)
            if "result" not in reply:
                raise SystemExit(f"session/prompt failed: {reply}")
            if counter.chunks != chunks:
                raise SystemExit(f"the client saw {counter.chunks} chunks of {chunks}")
        finally:
            assert process.stdin is not None
            process.stdin.close()
            process.wait(timeout=120)
        commits = drained(listener).count(session)
        row = conn.execute(
            "SELECT s.next_seq, count(r.seq0), coalesce(sum(octet_length(r.body::text)), 0) "
            "FROM acp_sessions s LEFT JOIN acp_records r "
            "ON r.session = s.id AND r.seq0 >= %s WHERE s.id = %s GROUP BY s.next_seq",
            (seq_before, session),
        ).fetchone()
    assert row is not None
    events = int(row[0]) - seq_before
    wal = wal_after - wal_before
    return {
        "chunks": chunks,
        "paceMs": pace_ms,
        "seconds": round(seconds, 2),
        "events": events,
        "commits": commits,
        "commitsPerSecond": round(commits / seconds, 2),
        "eventsPerCommit": round(events / commits, 2),
        "records": int(row[1]),
        "storedBytesPerEvent": round(int(row[2]) / events, 1),
        "walBytes": wal,
        "walBytesPerCommit": round(wal / commits),
        "walBytesPerEvent": round(wal / events, 1),
    }


# ---------------------------------------------------------------------------------------------
# Many commits from this process, then decoded.


async def create_tables(url: str) -> None:
    store = PostgresStore(url)
    try:
        await store.prepare()
    finally:
        await store.aclose()


def prepare_decoding(url: str) -> bool:
    """The publication and the slots, before the volume is written (False: no logical WAL)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW wal_level").fetchone()
        if row is None or row[0] != "logical":
            log(f"decoding: wal_level is {row[0] if row else '?'}, not logical: left out")
            return False
        conn.execute(
            f"CREATE PUBLICATION {PUBLICATION} FOR TABLE acp_sessions (id, next_seq) "
            "WITH (publish = 'update')"
        )
        conn.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')",
            (SLOTS["testDecoding"],),
        )
        conn.execute(
            "SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SLOTS["pgoutput"],)
        )
    return True


async def write_volume(url: str, writers: int, commits: int, per_commit: int) -> float:
    """`writers` sessions each committing `commits` batches of `per_commit` text deltas
    concurrently through the store's writer; the seconds it took."""
    store = PostgresStore(url)
    texts = fragments(SEED + 1, per_commit)
    try:
        opened = []
        for k in range(writers):
            header = SessionHeader(SESSION_FORMAT_VERSION, f"volume-{k}", 0, "/work")
            opened.append(await store.create(header))

        async def stream(writer: Any) -> None:
            seq = 0
            for _ in range(commits):
                writer.append(
                    [
                        AssistantChunk(seq + i, seq + i, AssistantChunkData(0, 0, TextDelta(0, t)))
                        for i, t in enumerate(texts)
                    ]
                )
                seq += per_commit
                await writer.flush()
            await writer.close()

        start = time.perf_counter()
        async with anyio.create_task_group() as tasks:
            for writer in opened:
                tasks.start_soon(stream, writer)
        return time.perf_counter() - start
    finally:
        await store.aclose()


def volume_run(url: str, writers: int, commits: int, per_commit: int) -> tuple[dict[str, Any], int]:
    """The volume's figures, and the WAL position it ended at."""
    with psycopg.connect(url, autocommit=True) as conn:
        wal_before = lsn(conn)
        seconds = anyio.run(write_volume, url, writers, commits, per_commit)
        wal_after = lsn(conn)
    total = writers * commits
    wal = wal_after - wal_before
    return {
        "writers": writers,
        "commits": total,
        "eventsPerCommit": per_commit,
        "seconds": round(seconds, 2),
        "commitsPerSecond": round(total / seconds),
        "walBytes": wal,
        "walBytesPerCommit": round(wal / total),
    }, wal_after


def decode(url: str, wal_end: int) -> dict[str, Any]:
    """Each slot read up to `wal_end` by one decoder (a backend of the server), timed."""
    upto = f"'0/0'::pg_lsn + {wal_end}"
    queries = {
        "testDecoding": (
            "SELECT count(*) FILTER (WHERE data LIKE 'COMMIT%%'), "
            "coalesce(sum(octet_length(data)), 0) "
            f"FROM pg_logical_slot_get_changes(%s, {upto}, NULL, 'skip-empty-xacts', '1')"
        ),
        "pgoutput": (
            "SELECT count(*) FILTER (WHERE get_byte(data, 0) = 67), "  # 'C': a commit
            "coalesce(sum(octet_length(data)), 0) "
            f"FROM pg_logical_slot_get_binary_changes(%s, {upto}, NULL, 'proto_version', '1', "
            f"'publication_names', '{PUBLICATION}')"
        ),
    }
    results: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name, query in queries.items():
            start_row = conn.execute(
                "SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (SLOTS[name],),
            ).fetchone()
            assert start_row is not None
            start = time.perf_counter()
            row = conn.execute(query, (SLOTS[name],)).fetchone()
            seconds = time.perf_counter() - start
            assert row is not None
            commits, output = int(row[0]), int(row[1])
            wal = wal_end - int(start_row[0])
            results[name] = {
                "seconds": round(seconds, 3),
                "commits": commits,
                "commitsPerSecond": round(commits / seconds),
                "walMBPerSecond": round(wal / seconds / BYTES_PER_MB, 1),
                "outputBytesPerCommit": round(output / commits) if commits else 0,
            }
            conn.execute("SELECT pg_drop_replication_slot(%s)", (SLOTS[name],))
    return results


# ---------------------------------------------------------------------------------------------
# NOTIFY.


async def listener_drain(url: str, count: int) -> float:
    """Seconds for one listener as the store's to take `count` notifications, queued by one
    transaction, from its commit to the last one received."""
    listener = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await listener.execute(f"LISTEN {CHANNEL}")
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as sender:
            await sender.execute(
                "SELECT count(pg_notify(%s, 's' || g)) FROM generate_series(1, %s) g",
                (CHANNEL, count),
            )
        start = time.perf_counter()
        received = 0
        async for _ in listener.notifies(stop_after=count):
            received += 1
        return time.perf_counter() - start
    finally:
        await listener.close()


class Counting(threading.Thread):
    """A listener on the store's channel counting what it receives until stopped and drained."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(url, autocommit=True)
        self.conn.execute(f"LISTEN {CHANNEL}")
        self.received = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        while True:
            got = sum(1 for _ in self.conn.notifies(timeout=0.5))
            self.received += got
            if got == 0 and self.stopping.is_set():
                return

    def stop(self) -> int:
        self.stopping.set()
        self.join()
        self.conn.close()
        return self.received


BENCH_SESSIONS = 10_000


def flush_script(per_commit: int, notify: bool) -> str:
    """The writer's flush as a pgbench transaction: the session's next seq moved under its
    epoch, one record of `per_commit` events inserted (`acp_bench_body`'s: a stored record of
    the volume part), and, with `notify`, the session notified."""
    session = "'bench-' || :s"
    lines = [
        f"\\set s random(1, {BENCH_SESSIONS})",
        "BEGIN;",
        f"UPDATE acp_sessions SET next_seq = next_seq + {per_commit}, updated_at = 0 "
        f"WHERE id = {session} AND epoch = 1 RETURNING next_seq - {per_commit} AS seq0 \\gset",
        f"INSERT INTO acp_records SELECT {session}, :seq0, {per_commit}, body FROM acp_bench_body;",
    ]
    if notify:
        lines.append(f"SELECT pg_notify('{CHANNEL}', {session});")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


READS_PER_WAKE = 4
"""What `follow_stored` reads after a wake-up that finds one batch: the next seq, the records by
seq, the next seq again, whether the session still exists."""


def catch_up_script(per_commit: int) -> str:
    """A follower's wake-up as a pgbench script, in the engine's own statements
    (`Statements` in PostgreSQL's dialect, as the engine makes them): a session's last batch
    read by seq, each statement a transaction of its own, as the pool's reads are."""
    sql = Statements("acp_", "%s", "header::text", "body::text")
    session = "'bench-' || :s"
    lines = [
        f"\\set s random(1, {BENCH_SESSIONS})",
        (sql.next_seq % session) + " \\gset",
        f"\\set lo greatest(:next_seq - {per_commit}, 0)",
        (sql.between % (session, ":next_seq", session, ":lo")) + ";",
        (sql.next_seq % session) + ";",
        (sql.exists % session) + ";",
    ]
    assert len(lines) - 2 == READS_PER_WAKE
    return "\n".join(lines) + "\n"


def pgbench(url: str, found: str, clients: int, seconds: int, script: str) -> tuple[float, int]:
    """Transactions per second of `clients` pgbench connections running `script` for `seconds`
    (`synchronous_commit` off, as a flush commits), and how many they committed."""
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as file:
        file.write(script)
    run = ["-f", file.name, url]
    try:
        done = subprocess.run(
            [found, "-n", "-c", str(clients), "-j", "2", "-T", str(seconds), *run],
            capture_output=True,
            text=True,
            timeout=seconds + 120,
            env={**os.environ, "PGOPTIONS": "-c synchronous_commit=off"},
            check=False,
        )
    finally:
        os.unlink(file.name)
    found_tps = re.search(r"tps = ([0-9.]+)", done.stdout)
    found_count = re.search(r"transactions actually processed: ([0-9]+)", done.stdout)
    if done.returncode != 0 or found_tps is None or found_count is None:
        raise SystemExit(f"pgbench failed: {done.stderr or done.stdout}")
    return float(found_tps.group(1)), int(found_count.group(1))


def flush_run(
    url: str, binaries: Path | None, per_commit: int, clients: int, seconds: int, listeners: int
) -> tuple[dict[str, Any], int]:
    """pgbench committing the writer's flush transaction: without a notification, then with
    one while one and `listeners` connections listen. The figures, and the WAL position it
    ended at."""
    found = shutil.which("pgbench") or (str(binaries / "pgbench") if binaries else None)
    if found is None:
        raise SystemExit("pgbench not found")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE acp_bench_body AS SELECT body FROM acp_records "
            "WHERE session = 'volume-0' AND count = %s LIMIT 1",
            (per_commit,),
        )
        conn.execute(
            "INSERT INTO acp_sessions (id, header, created_at, next_seq, epoch) "
            "SELECT 'bench-' || g, '{}', 0, 0, 1 FROM generate_series(1, %s) g",
            (BENCH_SESSIONS,),
        )
        row = conn.execute("SELECT octet_length(body::text) FROM acp_bench_body").fetchone()
        assert row is not None, "no record of the volume part to replay"
        result: dict[str, Any] = {
            "clients": clients,
            "seconds": seconds,
            "sessions": BENCH_SESSIONS,
            "recordBytes": int(row[0]),
        }
        runs: list[tuple[str, int, bool]] = [("plain", 0, False)]
        runs += [(f"notifying{n}Listeners", n, True) for n in sorted({1, listeners})]
        for name, count, notify in runs:
            counting = [Counting(url) for _ in range(count)]
            for listener in counting:
                listener.start()
            wal_before = lsn(conn)
            tps, committed = pgbench(url, found, clients, seconds, flush_script(per_commit, notify))
            wal_after = lsn(conn)
            received = [listener.stop() for listener in counting]
            result[name] = {
                "commitsPerSecond": round(tps),
                "commits": committed,
                "walBytesPerCommit": round((wal_after - wal_before) / committed),
            }
            if received:
                result[name]["leastReceivedByAListener"] = min(received)
    tps, _ = pgbench(url, found, clients, seconds, catch_up_script(per_commit))
    result["catchUp"] = {
        "wakeUpsPerSecond": round(tps),
        "readsPerSecond": round(tps * READS_PER_WAKE),
    }
    return result, wal_after


# ---------------------------------------------------------------------------------------------


def projected(sessions: int, turn: dict[str, Any], volume: dict[str, Any]) -> dict[str, Any]:
    """The measured per-session rates multiplied out to `sessions` streaming sessions."""
    commits = sessions * turn["commitsPerSecond"]
    wal = commits * volume["walBytesPerCommit"]
    return {
        "sessions": sessions,
        "commitsPerSecond": round(commits),
        "walMBPerSecond": round(wal / BYTES_PER_MB, 1),
        "notificationsPerListenerPerSecond": round(commits),
        "catchUpReadsPerSecond": round(commits * READS_PER_WAKE),
    }


def database(given: str | None) -> tuple[str, Any, Path | None]:
    """The database to run on, the throwaway cluster to stop afterwards, the server binaries."""
    from postgres_server import Cluster, fresh_database, server_binaries

    binaries = server_binaries()
    if given:
        return given, None, binaries
    if binaries is None:
        raise SystemExit("no PostgreSQL server (give --postgres URL or install PostgreSQL)")
    cluster = Cluster(binaries)
    server = cluster.start("wal_level=logical", "max_replication_slots=4", "max_wal_senders=4")
    return fresh_database(server), cluster, binaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", metavar="URL", help="an empty PostgreSQL database")
    parser.add_argument("--chunks", type=int, default=600, help="the turn's deltas (600)")
    parser.add_argument("--pace-ms", type=int, default=13, help="ms between deltas (13)")
    parser.add_argument("--writers", type=int, default=20, help="volume sessions (20)")
    parser.add_argument("--commits", type=int, default=100, help="commits each (100)")
    parser.add_argument("--notifications", type=int, default=100_000, help="drained (100,000)")
    parser.add_argument("--clients", type=int, default=8, help="pgbench connections (8)")
    parser.add_argument("--seconds", type=int, default=5, help="each pgbench run (5)")
    parser.add_argument("--listeners", type=int, default=8, help="listening hosts (8)")
    parser.add_argument("--sessions", type=int, default=10_000, help="projected to (10,000)")
    args = parser.parse_args(argv)
    url, cluster, binaries = database(args.postgres)
    try:
        with psycopg.connect(url) as conn:
            row = conn.execute("SHOW server_version").fetchone()
        version = row[0] if row else "?"
        anyio.run(create_tables, url)
        decodable = prepare_decoding(url)
        with tempfile.TemporaryDirectory(prefix="acp-follow-bench-") as scratch:
            turn = turn_run(url, Path(scratch), args.chunks, args.pace_ms)
        log("turn      " + "  ".join(f"{k} {v}" for k, v in turn.items()))
        per_commit = max(1, round(turn["eventsPerCommit"]))
        volume, _ = volume_run(url, args.writers, args.commits, per_commit)
        log("volume    " + "  ".join(f"{k} {v}" for k, v in volume.items()))
        flush, wal_end = flush_run(
            url, binaries, per_commit, args.clients, args.seconds, args.listeners
        )
        log("flush     " + "  ".join(f"{k} {v}" for k, v in flush.items()))
        decoding = decode(url, wal_end) if decodable else {}
        for name, figures in decoding.items():
            log(f"{name:<13} " + "  ".join(f"{k} {v}" for k, v in figures.items()))
        drain_s = anyio.run(listener_drain, url, args.notifications)
        listener = {
            "notifications": args.notifications,
            "drainPerSecond": round(args.notifications / drain_s),
        }
        log("listener  " + "  ".join(f"{k} {v}" for k, v in listener.items()))
    finally:
        if cluster is not None:
            cluster.stop()
    result = {
        "postgresql": version,
        "cores": os.cpu_count(),
        "loadAverage": round(os.getloadavg()[0], 1),
        "turn": turn,
        "volume": volume,
        "flush": flush,
        "decoding": decoding,
        "listener": listener,
        "projected": projected(args.sessions, turn, volume),
    }
    print("FOLLOW_VOLUME_RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
