"""A damaged SQLite store (SPEC 2.6, 4, 8): a store written by the project's own writer, then
damaged on disk (4 KB of zeros over a page, a truncated file, a garbage header). `store verify`
runs SQLite's `PRAGMA quick_check` first and exits 1 with its findings, never a traceback; every
read that meets the damage raises the session's `CorruptLog`, which the server answers -32010."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp_process import AcpProcess
from test_store_contract import conversation, header

from acp_server.storage.errors import CorruptLog
from acp_server.storage.sql.sqlite import SqliteStore

PAGE = 4096
DAMAGED = "the database is damaged: database disk image is malformed"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_store(path: Path, sessions: dict[str, int]) -> Path:
    """A store of `sessions` (id -> turns), written five events a flush as a stream is."""

    async def write() -> None:
        store = SqliteStore(path)
        try:
            for session_id, turns in sessions.items():
                writer = await store.create(header(session_id))
                events = conversation(turns)
                for k in range(0, len(events), 5):
                    writer.append(events[k : k + 5])
                    await writer.flush()
                await writer.close()
        finally:
            await store.aclose()

    anyio.run(write)
    return path


def pages_of(path: Path, table: str) -> list[int]:
    """The numbers of `table`'s leaf pages (SQLite's `dbstat`), in file order."""
    db = sqlite3.connect(path)
    try:
        query = "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno"
        return [page for (page,) in db.execute(query, (table,))]
    finally:
        db.close()


def zero_page(path: Path, page: int) -> None:
    """4 KB of zeros over page `page` (numbered from 1, as SQLite does)."""
    with path.open("r+b") as file:
        file.seek((page - 1) * PAGE)
        file.write(bytes(PAGE))


def middle_records_page(path: Path) -> int:
    """The `records` leaf page nearest the middle of the file."""
    middle = path.stat().st_size // PAGE // 2
    return min(pages_of(path, "records"), key=lambda page: abs(page - middle))


def zeros_in_the_middle(path: Path) -> None:
    # Over a page of records: SQLite's own finding then names no page of its layout.
    zero_page(path, middle_records_page(path))


def zeros_over_the_message_index(path: Path) -> None:
    # A page no session read touches: `log verify` of each session found nothing wrong.
    zero_page(path, pages_of(path, "messages")[-1])


def truncated(path: Path) -> None:
    with path.open("r+b") as file:
        file.truncate(path.stat().st_size // 2)


def garbage_header(path: Path) -> None:
    with path.open("r+b") as file:
        file.write(b"garbage!" * 8)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return write_store(tmp_path / "sessions.db", {f"s{k}": 5 for k in range(40)})


@pytest.mark.process
@pytest.mark.parametrize(
    ("damage", "stdout", "stderr"),
    [
        (
            zeros_in_the_middle,
            "{url}: database disk image is malformed\n"
            "FAILED: {url} is damaged: no session verified\n",
            "",
        ),
        (
            zeros_over_the_message_index,
            "{url}: database disk image is malformed\n"
            "FAILED: {url} is damaged: no session verified\n",
            "",
        ),
        (
            truncated,
            "",
            "acp-server store verify: error: {url}: cannot open the database: "
            "database disk image is malformed\n",
        ),
        (
            garbage_header,
            "",
            "acp-server store verify: error: {url}: cannot open the database: "
            "file is not a database\n",
        ),
    ],
    ids=["zeros in the middle", "zeros over the message index", "truncated", "garbage header"],
)
def test_store_verify_of_a_damaged_database_exits_1_with_sqlites_findings(
    store: Path, damage: Callable[[Path], None], stdout: str, stderr: str
) -> None:
    url = f"sqlite://{store}"
    assert run("store", "verify", url).returncode == 0
    damage(store)
    done = run("store", "verify", url)
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        stdout.format(url=url),
        stderr.format(url=url),
    )


def rows_before_the_damage(path: Path, session_id: str) -> int:
    """How many of the session's records a plain SQLite scan reads before it meets the damage."""
    db = sqlite3.connect(path)
    read = 0
    try:
        for _ in db.execute(
            "SELECT body FROM records WHERE session = ? ORDER BY seq0", (session_id,)
        ):
            read += 1
    except sqlite3.DatabaseError:
        return read
    finally:
        db.close()
    raise AssertionError("the scan met no damage")


@pytest.fixture
def damaged_session(tmp_path: Path) -> tuple[Path, int]:
    """A store of one long session with 4 KB of zeros over a records page in the middle, and
    the line of the log (header line 1, records from line 2) where reading it stops."""
    path = write_store(tmp_path / "sessions.db", {"s1": 30})
    zero_page(path, middle_records_page(path))
    return path, rows_before_the_damage(path, "s1") + 2


@pytest.mark.process
def test_log_verify_of_a_session_on_a_damaged_page_names_the_line_it_reached(
    damaged_session: tuple[Path, int],
) -> None:
    path, line = damaged_session
    done = run("log", "verify", "--store", f"sqlite://{path}", "s1")
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout.splitlines()[0] == f"sqlite://{path} session s1:{line}: {DAMAGED}"


@pytest.mark.anyio
async def test_every_read_of_a_damaged_page_raises_the_sessions_corrupt_log(
    damaged_session: tuple[Path, int],
) -> None:
    path, line = damaged_session
    store = SqliteStore(path)
    try:
        with pytest.raises(CorruptLog) as read:
            await store.read("s1")
        with pytest.raises(CorruptLog) as opened:
            await store.open("s1", 0)
        history = await store.history("s1")
        with pytest.raises(CorruptLog) as ranged:
            await history.records(0, history.last_seq + 1)
    finally:
        await store.aclose()
    where = f"sqlite://{path} session s1"
    assert [(e.value.path, e.value.line, e.value.reason) for e in (read, opened, ranged)] == [
        (where, line, DAMAGED),
        (where, line, DAMAGED),
        (where, 2, DAMAGED),
    ]


def load_params(session_id: str) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": header(session_id).cwd, "mcpServers": []}


@pytest.mark.process
def test_session_load_of_a_session_on_a_damaged_page_is_32010_corrupt(
    damaged_session: tuple[Path, int],
) -> None:
    path, line = damaged_session
    with AcpProcess(None, "--store", f"sqlite://{path}") as server:
        server.initialize()
        error = server.error("session/load", load_params("s1"))
        assert server.finish() == 0
    assert error == {
        "code": -32010,
        "message": f"Session log unreadable: line {line}: {DAMAGED}",
        "data": {"reason": "corrupt", "line": line, "detail": DAMAGED},
    }
    assert "Traceback" not in server.stderr
