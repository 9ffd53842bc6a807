"""`acp-server log ... --store URL SESSION_ID`, `acp-server store copy` and `store verify`."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from test_store_contract import Events, conversation, header

from acp_server.core.events import SessionEvent
from acp_server.storage.api import fork_stored
from acp_server.storage.jsonl.store import JsonlStore
from acp_server.storage.sql.sqlite import SqliteStore

pytestmark = pytest.mark.process


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def jsonl_store(root: Path, sessions: dict[str, list[SessionEvent]]) -> Path:
    async def write() -> None:
        store = JsonlStore(root)
        for session_id, events in sessions.items():
            writer = await store.create(header(session_id))
            for k in range(0, len(events), 5):
                writer.append(events[k : k + 5])
                await writer.flush()
            await writer.close()

    anyio.run(write)
    return root


@pytest.fixture
def two_sessions(tmp_path: Path) -> Path:
    return jsonl_store(tmp_path / "jsonl", {"s1": conversation(3), "s2": conversation(1)})


def test_copy_jsonl_to_sqlite_and_back_keeps_every_event(
    two_sessions: Path, tmp_path: Path
) -> None:
    db = f"sqlite://{tmp_path}/sessions.db"
    assert run("store", "copy", str(two_sessions), db).stdout == "copied 2 sessions\n"
    assert run("store", "copy", db, str(tmp_path / "back")).stdout == "copied 2 sessions\n"
    for session_id in ("s1", "s2"):
        original = run("log", "cat", str(two_sessions / session_id)).stdout
        assert run("log", "cat", "--store", db, session_id).stdout == original
        assert run("log", "cat", str(tmp_path / "back" / session_id)).stdout == original
        assert (tmp_path / "back" / session_id / "session.jsonl").read_bytes() == (
            two_sessions / session_id / "session.jsonl"
        ).read_bytes()


def test_a_second_copy_changes_nothing(two_sessions: Path, tmp_path: Path) -> None:
    db = f"sqlite://{tmp_path}/sessions.db"
    run("store", "copy", str(two_sessions), db)
    again = run("store", "copy", str(two_sessions), db)
    assert (again.returncode, again.stdout) == (0, "copied 0 sessions, 2 already there unchanged\n")


def test_a_copy_refuses_to_overwrite_another_session_of_the_same_id(
    two_sessions: Path, tmp_path: Path
) -> None:
    other = jsonl_store(tmp_path / "other", {"s1": conversation(2)})
    done = run("store", "copy", str(two_sessions), str(other))
    assert done.returncode == 1
    assert done.stdout == "copied 1 session\n"
    assert done.stderr == (
        f"acp-server store copy: s1: session s1: {other} holds another session of this id: "
        "not overwritten\n"
    )


def test_a_copy_of_named_sessions_copies_only_those(two_sessions: Path, tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    assert run("store", "copy", str(two_sessions), f"sqlite://{db}", "--session", "s2").stdout == (
        "copied 1 session\n"
    )
    assert sqlite3.connect(db).execute("SELECT id FROM sessions").fetchall() == [("s2",)]


def test_log_stats_and_verify_read_a_session_of_a_sqlite_store(
    two_sessions: Path, tmp_path: Path
) -> None:
    db = f"sqlite://{tmp_path}/sessions.db"
    run("store", "copy", str(two_sessions), db)
    verified = run("log", "verify", "--store", db, "s1")
    # The same rows as the JSONL log's lines: records are kept as written.
    assert (verified.returncode, verified.stdout) == (
        0,
        run("log", "verify", str(two_sessions / "s1")).stdout,
    )
    assert verified.stdout == f"OK: {len(conversation(3))} events in 27 lines\n"
    stats = run("log", "stats", "--store", db, "s1").stdout
    assert f"log          {db} session s1\n" in stats
    assert f"events       {len(conversation(3))}\n" in stats


def test_log_verify_names_the_row_a_sqlite_store_holds_wrong(
    two_sessions: Path, tmp_path: Path
) -> None:
    db = tmp_path / "sessions.db"
    run("store", "copy", str(two_sessions), f"sqlite://{db}")
    connection = sqlite3.connect(db)
    connection.execute(
        "UPDATE records SET body = replace(body, '\"seq\":1,', '\"seq\":7,') "
        "WHERE session = 's1' AND seq0 = 1"
    )
    connection.commit()
    connection.close()
    done = run("log", "verify", "--store", f"sqlite://{db}", "s1")
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == (
        f"sqlite://{db} session s1:3: seq gap: expected seq 1, found 7"
    )


def test_store_verify_checks_every_session_of_each_engine(
    two_sessions: Path, tmp_path: Path
) -> None:
    db = f"sqlite://{tmp_path}/sessions.db"
    run("store", "copy", str(two_sessions), db)
    for url in (str(two_sessions), db):
        done = run("store", "verify", url)
        assert (done.returncode, done.stdout.splitlines()[-1]) == (
            0,
            "OK: 2 of 2 sessions verified",
        )


def test_log_with_a_store_that_does_not_exist_exits_2(tmp_path: Path) -> None:
    done = run("log", "cat", "--store", f"sqlite://{tmp_path}/none.db", "s1")
    assert (done.returncode, done.stderr) == (
        2,
        f"acp-server log cat: error: sqlite://{tmp_path}/none.db: no such database\n",
    )
    assert not (tmp_path / "none.db").exists()


def test_an_interrupted_session_copies_as_it_is(tmp_path: Path) -> None:
    built = Events()
    built.turn(0, "hi", ["a", "b", "c"], end=False)
    source = jsonl_store(tmp_path / "jsonl", {"s1": built.events})
    db = tmp_path / "sessions.db"
    run("store", "copy", str(source), f"sqlite://{db}")

    async def read() -> list[SessionEvent]:
        store = SqliteStore(db)
        try:
            return (await store.read("s1")).events
        finally:
            await store.aclose()

    assert anyio.run(read) == built.events


def test_copy_jsonl_to_postgresql_and_back_is_identical_and_verifies(
    two_sessions: Path, tmp_path: Path, postgres_url: str
) -> None:
    assert run("store", "init", postgres_url).stdout == f"{postgres_url}: ready\n"
    assert run("store", "copy", str(two_sessions), postgres_url).stdout == "copied 2 sessions\n"
    back = tmp_path / "back"
    assert run("store", "copy", postgres_url, str(back)).stdout == "copied 2 sessions\n"
    for session_id in ("s1", "s2"):
        original = run("log", "cat", str(two_sessions / session_id)).stdout
        assert run("log", "cat", "--store", postgres_url, session_id).stdout == original
        assert (back / session_id / "session.jsonl").read_bytes() == (
            two_sessions / session_id / "session.jsonl"
        ).read_bytes()
    done = run("store", "verify", postgres_url)
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "OK: 2 of 2 sessions verified")


def test_store_init_of_a_postgresql_url_hides_its_password() -> None:
    done = run("store", "init", "postgresql://acp:secret@db.invalid/acp")
    assert done.returncode == 2  # could not run: it cannot connect
    assert done.stderr.startswith(
        "acp-server store init: error: postgresql://acp:***@db.invalid/acp: cannot connect: "
    )
    assert "secret" not in done.stderr


def test_a_copy_of_a_fork_keeps_its_link_and_its_cut_row(tmp_path: Path) -> None:
    root = jsonl_store(tmp_path / "jsonl", {"s1": conversation(4)})

    async def fork() -> None:
        store = JsonlStore(root)
        parent = await store.read("s1")
        # Through seq 37: inside the row 35..38 of turn 3's deltas, as the writer stored it.
        opened = await fork_stored(store, parent, 37, header("f1"), 5000)
        await opened.writer.close()

    anyio.run(fork)
    db = f"sqlite://{tmp_path}/sessions.db"
    assert run("store", "copy", str(root), db, "--session", "f1").stdout == "copied 1 session\n"
    copied = run("log", "cat", "--store", db, "f1").stdout
    assert copied == run("log", "cat", str(root / "f1")).stdout
    assert copied.splitlines()[39] == (  # line 0 is the header
        '{"type":"session/forked","seq":38,"time":5000,'
        '"data":{"fromSessionId":"s1","throughSeq":37}}'
    )
    lines = (root / "f1" / "session.jsonl").read_bytes().splitlines()
    assert [line for line in lines if line.startswith(b'{"type":"text-chunks","seq0":35,')] == [
        b'{"type":"text-chunks","seq0":35,"time0":10035,"data":{"turn":3,"step":0,"index":0,'
        b'"dt":[1,1],"texts":["w3.2 ","w3.3 ","w3.4 "]}}'
    ]
    verified = run("log", "verify", "--store", db, "f1")
    assert (verified.returncode, verified.stdout) == (
        0,
        run("log", "verify", str(root / "f1")).stdout,
    )


def test_a_copy_carries_each_session_s_blobs(two_sessions: Path, tmp_path: Path) -> None:
    async def put() -> None:
        await JsonlStore(two_sessions).put_blob("s1", b"before the edit\n")

    anyio.run(put)
    db = tmp_path / "sessions.db"
    assert run("store", "copy", str(two_sessions), f"sqlite://{db}").stdout == "copied 2 sessions\n"

    async def kept() -> tuple[list[str], list[str], bytes | None]:
        store = SqliteStore(db)
        try:
            digests = await store.blob_digests("s1")
            return digests, await store.blob_digests("s2"), await store.get_blob("s1", digests[0])
        finally:
            await store.aclose()

    s1, s2, content = anyio.run(kept)
    assert (s1, s2, content) == (
        [hashlib.sha256(b"before the edit\n").hexdigest()],
        [],
        b"before the edit\n",
    )
