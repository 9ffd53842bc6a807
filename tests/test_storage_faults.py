"""Faults of the machine under the real server: a full disk, a file size limit, no file
descriptors left, a read-only sessions directory (SPEC 2.4, 2.5, 4 Errors).

A write that fails never leaves the log unloadable: the writer cuts the file back to its last
complete record and writes nothing more until the log is re-read; the request answers -32013
with `data` saying what happened (`{"reason": "disk-full", "errno": "ENOSPC"}`); once the
machine recovers, the next prompt in the same process works, and a fresh process loads the
session and `acp-server log verify` passes. A read-only directory still lets an intact session
load. A `session/new` that fails leaves nothing behind.

The disk fills for real: a small tmpfs mounted on the sessions root and a ballast file (these
tests need root, as CI has; they are skipped, saying so, where mounting is not permitted).
"""

from __future__ import annotations

import os
import random
import resource
import signal
import string
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from fixtures_builder import Scenario, Step, step_chunks
from mounts import BALLAST_NAME, fill, read_only_bind, tmpfs
from polling import TIMEOUT, wait_until
from prompt_harness import PromptServer
from surface_values import session_setup

from acp_server.storage.jsonl.log import read_log

pytestmark = pytest.mark.process

NOISE = "".join(random.Random(20251201).choices(string.ascii_letters + " ", k=16_000))
"""Text that compresses poorly: whether plain or zstd, its log records fill several pages."""

SCENARIO = Scenario([("first", [Step(text=NOISE)]), ("second", [Step(text="Done.")])])

HANG_FIRST = Scenario(
    SCENARIO.turns,
    override={
        "patches": [
            {
                "at": 0,
                "entry": {
                    "kind": "hang",
                    "chunks": step_chunks(Step(text=NOISE))[:-2],  # no block end, no finish
                    "readyFile": "streamed",
                },
            }
        ]
    },
)
"""The first model call streams all of NOISE, then waits until the turn is cancelled."""

COMPRESSIONS = ["none", "zstd"]


def storage_failure(reason: str, name: str, what: str, when: str) -> dict[str, Any]:
    return {
        "code": -32013,
        "message": f"Storage failure: {what} ({name}) while {when}",
        "data": {"reason": reason, "errno": name},
    }


DISK_FULL = storage_failure("disk-full", "ENOSPC", "the disk is full", "writing the session log")


@pytest.fixture
def sessions(tmp_path: Path) -> Iterator[Path]:
    """The sessions root `PromptServer` uses, on a 2 MiB tmpfs."""
    with tmpfs(tmp_path / "sessions", "2m") as root:
        yield root


def log_path(root: Path, session_id: str, compression: str) -> Path:
    name = "session.jsonl.zst" if compression == "zstd" else "session.jsonl"
    return root / session_id / name


def logged(path: Path) -> list[dict[str, Any]]:
    return [msgspec.json.decode(msgspec.json.encode(e)) for e in read_log(path).events]


def outline(events: list[dict[str, Any]]) -> list[str]:
    """Event types without the chunks; a `turn/end` with its reason's kind."""
    return [
        f"turn/end {e['data']['reason']['kind']}" if e["type"] == "turn/end" else e["type"]
        for e in events
        if e["type"] != "assistant/chunk"
    ]


FIRST_TURN_CLOSED_BY_RECOVERY_THEN_SECOND = [
    "turn/start",
    "user/message",
    "step/start",
    "step/end",
    "turn/end interrupted",
    "turn/start",
    "user/message",
    "step/start",
    "assistant/message",
    "step/end",
    "turn/end completed",
]
"""The failed turn, closed as recovery closes a turn whose process died, then the next one."""


def streamed_text(events: list[dict[str, Any]], turn: int) -> str:
    return "".join(
        e["data"]["chunk"].get("text", "")
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["turn"] == turn
    )


def assert_loads_and_verifies(tmp_path: Path, session_id: str, path: Path, *flags: str) -> None:
    """A fresh process loads the session; `acp-server log verify` finds nothing wrong."""
    with PromptServer(tmp_path, tmp_path / "fixture", *flags) as fresh:
        loaded = fresh.request(
            "session/load",
            {"sessionId": session_id, "cwd": str(fresh.workspace), "mcpServers": []},
        )
        assert loaded.result == session_setup()
        assert loaded.text().endswith("Done.")
    verify = subprocess.run(
        [sys.executable, "-m", "acp_server", "log", "verify", str(path)],
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert verify.stdout.startswith("OK: ")


# ---------------------------------------------------------------------------------------------
# A full disk.


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_disk_that_fills_while_a_prompt_streams_fails_it_as_disk_full_and_the_session_goes_on(
    tmp_path: Path, sessions: Path, compression: str
) -> None:
    flags = ("--compression", compression)
    with PromptServer(tmp_path, HANG_FIRST, *flags) as server:
        session = server.new_session()
        prompt = server.send_request("session/prompt", server.prompt_params(session, "first"))
        wait_until(lambda: (server.workspace / "streamed").exists(), "the model streamed")
        ballast = fill(sessions)
        server.cancel(session)  # the cancelled turn's records no longer fit

        assert server.read_until_response(prompt).error == DISK_FULL

        ballast.unlink()
        assert server.prompt(session, "second").stop_reason == "end_turn"

    path = log_path(sessions, session, compression)
    events = logged(path)
    assert outline(events) == FIRST_TURN_CLOSED_BY_RECOVERY_THEN_SECOND
    assert NOISE.startswith(streamed_text(events, 0))
    assert_loads_and_verifies(tmp_path, session, path, *flags)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_prompt_on_a_full_disk_fails_as_disk_full_and_the_next_one_works_once_space_is_freed(
    tmp_path: Path, sessions: Path, compression: str
) -> None:
    flags = ("--compression", compression)
    with PromptServer(tmp_path, SCENARIO, *flags) as server:
        session = server.new_session()
        path = log_path(sessions, session, compression)
        synced = path.read_bytes()
        ballast = fill(sessions)

        assert server.prompt(session, "first").error == DISK_FULL

        ballast.unlink()
        assert server.prompt(session, "second").stop_reason == "end_turn"

    assert path.read_bytes().startswith(synced)  # nothing fsynced was cut
    assert outline(logged(path)) == FIRST_TURN_CLOSED_BY_RECOVERY_THEN_SECOND
    assert_loads_and_verifies(tmp_path, session, path, *flags)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_session_new_on_a_full_disk_fails_as_disk_full_and_leaves_no_session_behind(
    tmp_path: Path, sessions: Path, compression: str
) -> None:
    with PromptServer(tmp_path, SCENARIO, "--compression", compression) as server:
        ballast = fill(sessions)

        answered = server.request("session/new", {"cwd": str(server.workspace), "mcpServers": []})

        assert answered.error == DISK_FULL
        assert sorted(os.listdir(sessions)) == [BALLAST_NAME]
        ballast.unlink()
        assert server.request("session/list", {}).result == {"sessions": []}
    assert "session/list" not in server.process.stderr


# ---------------------------------------------------------------------------------------------
# A file size limit (RLIMIT_FSIZE). Python ignores SIGXFSZ from start-up, so writes past the
# limit fail with EFBIG instead of killing the server.


def test_a_file_size_limit_fails_the_prompt_as_file_too_large_and_the_next_one_works_once_lifted(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, SCENARIO) as server:
        session = server.new_session()
        pid = server.process.process.pid
        size = server.log_path(session).stat().st_size
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (size + 1024, resource.RLIM_INFINITY))

        assert server.prompt(session, "first").error == storage_failure(
            "file-too-large",
            "EFBIG",
            "the log file has reached the largest size allowed",
            "writing the session log",
        )

        resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY,) * 2)
        assert server.prompt(session, "second").stop_reason == "end_turn"

    path = server.log_path(session)
    assert outline(logged(path)) == FIRST_TURN_CLOSED_BY_RECOVERY_THEN_SECOND
    assert_loads_and_verifies(tmp_path, session, path)


def test_sigterm_whose_shutdown_cannot_write_the_log_exits_143(tmp_path: Path) -> None:
    server = PromptServer(tmp_path, HANG_FIRST)
    try:
        session = server.new_session()
        server.send_request("session/prompt", server.prompt_params(session, "first"))
        wait_until(lambda: (server.workspace / "streamed").exists(), "the model streamed")
        pid = server.process.process.pid
        size = server.log_path(session).stat().st_size
        # The cancelled turn's last records cannot be written: the log closes without them.
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))
        os.kill(pid, signal.SIGTERM)

        assert server.process.wait(TIMEOUT) == 128 + signal.SIGTERM
    finally:
        server.process.kill()
    assert f"shutdown did not finish cleanly: session {session}: " in server.process.stderr


# ---------------------------------------------------------------------------------------------
# No file descriptors left (RLIMIT_NOFILE lowered to the lowest free descriptor).


def serving(server: PromptServer) -> None:
    """Return once the server has started: `initialize` is answered while it is still starting
    (`acp_server.startup.handshake`), and a process starved while it imports cannot start."""
    assert server.request("authenticate", {"methodId": "agent"}).result == {}


def starve_of_descriptors(pid: int) -> tuple[int, int]:
    """Lower the process's RLIMIT_NOFILE so that its next open fails; returns the old limits."""
    used = {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}
    lowest_free = min(set(range(len(used) + 1)) - used)
    old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, old[1]))
    return old


NO_DESCRIPTORS = storage_failure(
    "too-many-open-files",
    "EMFILE",
    "the server has no file descriptors left",
    "accessing the sessions directory",
)


def test_session_new_without_file_descriptors_fails_as_too_many_open_files_leaving_nothing(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, SCENARIO) as server:
        serving(server)
        pid = server.process.process.pid
        old = starve_of_descriptors(pid)

        answered = server.request("session/new", {"cwd": str(server.workspace), "mcpServers": []})

        resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
        assert answered.error == NO_DESCRIPTORS
        assert os.listdir(server.sessions_dir) == []


def test_session_list_without_file_descriptors_fails_as_too_many_open_files(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, SCENARIO) as server:
        server.new_session()
        pid = server.process.process.pid
        old = starve_of_descriptors(pid)

        answered = server.request("session/list", {})

        resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
        assert answered.error == NO_DESCRIPTORS


def test_session_load_without_file_descriptors_fails_as_too_many_open_files_and_works_after(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, SCENARIO) as first:
        session = first.new_session()
    with PromptServer(tmp_path, tmp_path / "fixture") as server:
        serving(server)
        pid = server.process.process.pid
        params = {"sessionId": session, "cwd": str(server.workspace), "mcpServers": []}
        old = starve_of_descriptors(pid)

        answered = server.request("session/load", params)

        resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
        assert answered.error == NO_DESCRIPTORS
        assert server.request("session/load", params).result == session_setup()


# ---------------------------------------------------------------------------------------------
# A read-only sessions directory.


READ_ONLY_LOG = storage_failure(
    "read-only", "EROFS", "the sessions directory is read-only", "writing the session log"
)


def load_params(server: PromptServer, session_id: str) -> dict[str, Any]:
    return {"sessionId": session_id, "cwd": str(server.workspace), "mcpServers": []}


def test_an_intact_session_loads_from_a_read_only_directory_and_a_prompt_says_read_only(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, SCENARIO) as first:
        session = first.new_session()
        assert first.prompt(session, "first").stop_reason == "end_turn"
    path = first.log_path(session)
    before = path.read_bytes()

    with (
        read_only_bind(first.sessions_dir),
        PromptServer(tmp_path, tmp_path / "fixture") as server,
    ):
        loaded = server.request("session/load", load_params(server, session))
        assert loaded.result == session_setup()
        assert loaded.text() == NOISE

        assert server.prompt(session, "second").error == READ_ONLY_LOG
        assert server.request(
            "session/new", {"cwd": str(server.workspace), "mcpServers": []}
        ).error == storage_failure(
            "read-only",
            "EROFS",
            "the sessions directory is read-only",
            "accessing the sessions directory",
        )
    assert path.read_bytes() == before


def test_a_session_loaded_read_only_is_a_notice_to_a_client_that_takes_notices(
    tmp_path: Path,
) -> None:
    with PromptServer(tmp_path, SCENARIO) as first:
        session = first.new_session()
        assert first.prompt(session, "first").stop_reason == "end_turn"
    path = first.log_path(session)
    before = path.read_bytes()
    notices = {"session": {"notices": {}}}

    with (
        read_only_bind(first.sessions_dir),
        PromptServer(tmp_path, tmp_path / "fixture", capabilities=notices) as server,
    ):
        assert server.request("session/load", load_params(server, session)).result
        update = server.read_update()
        while update["sessionUpdate"] != "notice":
            update = server.read_update()
    assert update == {
        "sessionUpdate": "notice",
        "severity": "warning",
        "title": "Session is read-only",
        "description": "Its log cannot be written (Read-only file system): the conversation "
        "can be replayed and paged, and the next prompt tries to write it again.",
    }
    assert path.read_bytes() == before


def test_a_session_needing_recovery_loads_read_only_unchanged_and_is_recovered_once_writable(
    tmp_path: Path,
) -> None:
    first = PromptServer(tmp_path, HANG_FIRST)
    with first.process:
        session = first.new_session()
        first.send_request("session/prompt", first.prompt_params(session, "first"))
        path = first.log_path(session)
        wait_until(lambda: streamed_text(logged(path), 0) == NOISE, "the stream was flushed")
        first.process.kill()  # the turn stays open in the log
    before = path.read_bytes()

    with PromptServer(tmp_path, tmp_path / "fixture") as server:
        with read_only_bind(server.sessions_dir):
            loaded = server.request("session/load", load_params(server, session))
            assert loaded.result == session_setup()
            assert loaded.text() == NOISE
            assert server.prompt(session, "second").error == READ_ONLY_LOG
            assert path.read_bytes() == before  # no closers: nothing can be written

        assert server.prompt(session, "second").stop_reason == "end_turn"
    assert outline(logged(path)) == FIRST_TURN_CLOSED_BY_RECOVERY_THEN_SECOND


def test_a_follower_shown_events_a_full_disk_dropped_is_ended_rewound_at_the_last_stored_seq(
    tmp_path: Path, sessions: Path
) -> None:
    with PromptServer(tmp_path, HANG_FIRST) as server:
        session = server.new_session()
        followed = server.request(
            "session.follow", {"address": {"kind": "session", "sessionId": session}}
        ).result
        prompt = server.send_request("session/prompt", server.prompt_params(session, "first"))
        wait_until(lambda: (server.workspace / "streamed").exists(), "the model streamed")
        ballast = fill(sessions)
        server.cancel(session)
        frames = server.read_until_response(prompt).frames
        while not any(f.get("method") == "session.followEnded" for f in frames):
            frames.append(server.process.read_frame(10))
        ballast.unlink()
        assert server.prompt(session, "second").stop_reason == "end_turn"

    shown = [f["params"]["event"] for f in frames if f.get("method") == "session.event"]
    [ended] = [f["params"] for f in frames if f.get("method") == "session.followEnded"]
    stored = logged(log_path(sessions, session, "none"))
    # Recovery's closing of the failed turn begins where the dropped events began: the follower
    # had taken some of those (sent to it, or still in its buffer).
    kept = next(seq for seq, e in enumerate(stored) if e["type"] == "step/end")
    last = ended["lastSeq"]
    assert ended == {
        "subscriptionId": followed["subscriptionId"],
        "reason": "rewound",
        "lastSeq": min(shown[-1]["seq"], kept - 1),
    }
    assert [e for e in shown if e["seq"] <= last] == stored[followed["cursor"] + 1 : last + 1]
    assert outline(stored[kept:]) == FIRST_TURN_CLOSED_BY_RECOVERY_THEN_SECOND[3:]
