"""`acp-server sessions list`, the store every command uses by default, the exit statuses they
share, and a closed output (`| head`) through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from test_store_contract import Events, conversation, header

from acp_server.cli.sessions import human_size
from acp_server.core.events import SessionEvent, SessionTitle, SessionTitleData
from acp_server.storage.jsonl.store import JsonlStore

pytestmark = pytest.mark.process


def run(
    *args: str, env: dict[str, str] | None = None, stdout: int | None = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acp_server", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def titled(turns: int, title: str) -> list[SessionEvent]:
    built = Events()
    built.events = conversation(turns)
    built.seq = len(built.events)
    built.add(SessionTitle, SessionTitleData(title))
    return built.events


def jsonl_store(root: Path, sessions: dict[str, list[SessionEvent]]) -> Path:
    async def write() -> None:
        store = JsonlStore(root)
        for session_id, events in sessions.items():
            writer = await store.create(header(session_id))
            writer.append(events)
            await writer.close()

    anyio.run(write)
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    # "z-old" sorts first by id, "a-new" by its last activity (a later last event).
    return jsonl_store(
        tmp_path / "sessions", {"z-old": conversation(1), "a-new": titled(2, "Fix the build")}
    )


def log_size(store: Path, session_id: str) -> int:
    return (store / session_id / "session.jsonl").stat().st_size


def test_sessions_list_shows_the_most_recently_active_first(store: Path) -> None:
    done = run("sessions", "list", "--store", str(store))
    new, old = human_size(log_size(store, "a-new")), human_size(log_size(store, "z-old"))
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        f"ID     TITLE          CWD    LAST ACTIVITY (UTC)  {'SIZE':>{len(new)}}",
        f"a-new  Fix the build  /work  1970-01-01 00:00:10  {new}",
        f"z-old  -              /work  1970-01-01 00:00:10  {old:>{len(new)}}",
    ]


def test_sessions_list_json_gives_exact_values(store: Path) -> None:
    done = run("sessions", "list", "--store", str(store), "--json")
    assert json.loads(done.stdout) == [
        {
            "id": "a-new",
            "title": "Fix the build",
            "cwd": "/work",
            "createdAt": "1970-01-01T00:00:01.000Z",
            "lastActivity": "1970-01-01T00:00:10.019Z",
            "size": log_size(store, "a-new"),
        },
        {
            "id": "z-old",
            "title": None,
            "cwd": "/work",
            "createdAt": "1970-01-01T00:00:01.000Z",
            "lastActivity": "1970-01-01T00:00:10.008Z",
            "size": log_size(store, "z-old"),
        },
    ]


def test_sessions_list_gives_a_sqlite_session_the_size_of_its_log(
    store: Path, tmp_path: Path
) -> None:
    db = f"sqlite://{tmp_path}/sessions.db"
    assert run("store", "copy", str(store), db).returncode == 0
    listed = json.loads(run("sessions", "list", "--store", db, "--json").stdout)
    assert [(row["id"], row["size"]) for row in listed] == [
        ("a-new", log_size(store, "a-new")),
        ("z-old", log_size(store, "z-old")),
    ]


def test_sessions_list_reads_the_store_serve_would_use(store: Path) -> None:
    done = run("sessions", "list", "--json", env={"ACP_SERVER_SESSIONS_DIR": str(store)})
    assert [row["id"] for row in json.loads(done.stdout)] == ["a-new", "z-old"]


def test_sessions_list_of_an_empty_store_says_which_store(tmp_path: Path) -> None:
    done = run("sessions", "list", env={"ACP_SERVER_STORE": f"file://{tmp_path}/none"})
    assert (done.returncode, done.stdout) == (
        0,
        f"no sessions in file://{tmp_path}/none (from $ACP_SERVER_STORE)\n",
    )


def test_sessions_list_of_a_store_it_cannot_reach_exits_2() -> None:
    done = run("sessions", "list", "--store", "postgresql://acp:pw@127.0.0.1:1/acp")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(
        "acp-server sessions list: error: postgresql://acp:***@127.0.0.1:1/acp: cannot connect: "
    )
    assert len(done.stderr.splitlines()) == 1


def test_log_reads_a_session_id_from_the_store_serve_would_use(store: Path) -> None:
    by_path = run("log", "cat", str(store / "a-new"))
    by_id = run("log", "cat", "a-new", env={"ACP_SERVER_SESSIONS_DIR": str(store)})
    assert (by_id.returncode, by_id.stdout) == (0, by_path.stdout)


def test_log_of_a_session_id_the_default_store_lacks_exits_2_naming_the_store(
    store: Path,
) -> None:
    done = run("log", "stats", "nosuch", env={"ACP_SERVER_SESSIONS_DIR": str(store)})
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        f"acp-server log stats: error: no session nosuch in {store} "
        "(from $ACP_SERVER_SESSIONS_DIR)\n",
    )


def test_store_verify_without_a_url_checks_the_store_serve_would_use(store: Path) -> None:
    done = run("store", "verify", env={"ACP_SERVER_STORE": str(store)})
    assert (done.returncode, done.stdout.splitlines()[-1]) == (0, "OK: 2 of 2 sessions verified")


def test_store_verify_of_a_store_it_cannot_reach_exits_2() -> None:
    done = run("store", "verify", "postgresql://acp:pw@127.0.0.1:1/acp")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(
        "acp-server store verify: error: postgresql://acp:***@127.0.0.1:1/acp: cannot connect: "
    )


@pytest.mark.parametrize(
    "args",
    [
        ["log", "stats", "{store}/a-new"],
        ["log", "cat", "{store}/a-new"],
        ["log", "verify", "{store}/a-new"],
        ["store", "verify", "{store}"],
        ["sessions", "list", "--store", "{store}"],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_a_closed_output_ends_the_command_quietly(store: Path, args: list[str]) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: `| head -0`
    try:
        done = run(*(arg.format(store=store) for arg in args), stdout=write)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize(
    ("args", "statement"),
    [
        (["log", "verify", "--help"], "1 when it found problems"),
        (["store", "verify", "--help"], "1 when it found problems"),
        (["sessions", "list", "--help"], "2 when it could not run"),
        (["serve", "--help"], "2 when it could not run"),
    ],
)
def test_each_commands_help_states_the_exit_statuses(args: list[str], statement: str) -> None:
    done = run(*args, env={"COLUMNS": "1000"})
    assert statement in " ".join(done.stdout.split())
