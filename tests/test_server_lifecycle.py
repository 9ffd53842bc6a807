"""The real `acp-server serve` subprocess, driven with raw JSON lines: the ACP session lifecycle,
every error code of SPEC 4, and shutdown at end of input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from surface_values import session_setup

import acp_server
from acp_server.client.process import serve_command
from acp_server.core.events import (
    AssistantChunk,
    AssistantChunkData,
    SessionTitle,
    SessionTitleData,
    StepData,
    StepStart,
    TurnEnd,
    TurnStart,
    TurnStartData,
)
from acp_server.core.header import SESSION_FORMAT_VERSION, SessionHeader
from acp_server.core.stream import TextDelta
from acp_server.storage.errors import LogLocked
from acp_server.storage.jsonl.sessions import SessionStore

pytestmark = pytest.mark.process

SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

EXPECTED_INITIALIZE = {
    "protocolVersion": 1,
    "agentCapabilities": {
        "loadSession": True,
        "promptCapabilities": {"image": True, "audio": True, "embeddedContext": True},
        "sessionCapabilities": {
            "list": {},
            "resume": {},
            "close": {},
            "delete": {},
            "additionalDirectories": {},
            "systemPrompt": {"mode": {"override": {}}},
            "fork": {},
            "title": {},
            "status": {},
            "archive": {},
        },
        "mcpCapabilities": {"http": True, "sse": True},
        "auth": {"logout": {}},
        "_meta": {
            "acp-server": {
                "history": {
                    "page": "session.page",
                    "follow": "session.follow",
                    "search": "session.search",
                },
                "sessionList": {"follow": "session.list.follow"},
            }
        },
    },
    "authMethods": [],
    "agentInfo": {"name": "acp-server", "version": acp_server.__version__},
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def server(root: Path) -> Iterator[AcpProcess]:
    with AcpProcess(root) as process:
        yield process


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AcpProcess]:
    """One server for the tests that leave no state behind (they only see their own answers)."""
    with AcpProcess(tmp_path_factory.mktemp("shared") / "sessions") as process:
        yield process


def make_session(
    root: Path,
    session_id: str,
    created_at: int,
    cwd: str = "/work",
    events: list[Any] | None = None,
    **header: Any,
) -> None:
    """A session written to disk by another process, as the server would find it."""
    writer = SessionStore(root).create(
        SessionHeader(
            version=SESSION_FORMAT_VERSION, id=session_id, created_at=created_at, cwd=cwd, **header
        )
    )
    if events:
        writer.append(events)
    writer.close()


# ---------------------------------------------------------------------------------------------
# initialize and authenticate.

CLIENT_INFO = {"name": "probe", "version": "1"}


@pytest.mark.parametrize("asked", [1, 0])
def test_initialize_answers_version_1_to_versions_up_to_1(shared: AcpProcess, asked: int) -> None:
    frame = shared.request(
        "initialize",
        {"protocolVersion": asked, "clientCapabilities": {"fs": {"readTextFile": True}}},
    )
    assert frame == {"jsonrpc": "2.0", "id": frame["id"], "result": EXPECTED_INITIALIZE}


@pytest.mark.parametrize("asked", [2, 65535])
def test_initialize_answers_version_2_to_versions_from_2(shared: AcpProcess, asked: int) -> None:
    result = shared.request("initialize", {"protocolVersion": asked, "info": CLIENT_INFO})
    assert result["result"]["protocolVersion"] == 2
    assert result["result"]["info"] == EXPECTED_INITIALIZE["agentInfo"]
    # The shared process goes on speaking v1 to the tests after this one.
    assert shared.initialize() == EXPECTED_INITIALIZE


def test_initialize_with_a_wrong_typed_version_names_the_field(shared: AcpProcess) -> None:
    error = shared.error("initialize", {"protocolVersion": "1"})
    assert error == {
        "code": -32602,
        "message": "Invalid params: Expected `int`, got `str` - at `$.protocolVersion`",
        "data": {"path": "$.protocolVersion"},
    }
    error = shared.error("initialize", {})
    assert error["code"] == -32602
    assert error["message"] == "Invalid params: Object missing required field `protocolVersion`"
    # The connection is still usable afterwards.
    assert shared.initialize() == EXPECTED_INITIALIZE


def test_initialize_tolerates_malformed_client_capabilities(shared: AcpProcess) -> None:
    # The schema marks clientCapabilities "default on error": the handshake still succeeds.
    result = shared.result(
        "initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": "yes"}, "clientInfo": 3}
    )
    assert result == EXPECTED_INITIALIZE


def test_initialize_accepts_unknown_fields_and_meta(shared: AcpProcess) -> None:
    params = {
        "protocolVersion": 1,
        "futureField": {"x": 1},
        "_meta": {"protocolVersion": "not a number"},
    }
    assert shared.result("initialize", params) == EXPECTED_INITIALIZE


def test_authenticate(shared: AcpProcess) -> None:
    # llm-replay needs no key: its one method always succeeds.
    assert shared.result("authenticate", {"methodId": "agent"}) == {}
    error = shared.error("authenticate", {})
    assert error["code"] == -32602
    assert "methodId" in error["message"]


# ---------------------------------------------------------------------------------------------
# session/new.


def test_new_session_creates_the_log_with_its_header(server: AcpProcess, root: Path) -> None:
    mcp = [
        {
            "name": "fs",
            "command": "/bin/mcp-fs",
            "args": ["--ro"],
            "env": [{"name": "A", "value": "1"}],
        }
    ]
    result = server.result(
        "session/new",
        {"cwd": "/home/u/project", "mcpServers": mcp, "additionalDirectories": ["/data"]},
    )
    session_id = result["sessionId"]
    assert result == {"sessionId": session_id, **session_setup()}
    assert SESSION_ID.fullmatch(session_id)
    # The server connects in the background: the user is told once it has failed, and by then
    # the log holds the notice.
    report = server.read_frame()
    assert report["params"]["update"]["content"]["text"] == (
        "MCP server 'fs' is not available: FileNotFoundError: [Errno 2] No such file or directory\n\n"
    )
    lines = (root / session_id / "session.jsonl").read_bytes().splitlines()
    # The header, then the notice that the MCP server (a command that does not exist) did not
    # connect: kept in the log whatever the client shows.
    assert len(lines) == 2
    notice = json.loads(lines[1])
    assert (notice["type"], notice["data"]) == (
        "session/notice",
        {
            "severity": "warning",
            "title": "MCP server fs is not available",
            "description": "FileNotFoundError: [Errno 2] No such file or directory",
        },
    )
    header = json.loads(lines[0])
    assert header == {
        "type": "session",
        "version": SESSION_FORMAT_VERSION,
        "id": session_id,
        "createdAt": header["createdAt"],
        "cwd": "/home/u/project",
        "additionalDirectories": ["/data"],
        # Its name, transport and command: never its args or env (SPEC 4.5).
        "mcpServers": [{"name": "fs", "transport": "stdio", "command": "/bin/mcp-fs"}],
    }
    assert type(header["createdAt"]) is int and header["createdAt"] > 1_600_000_000_000


def test_new_sessions_get_distinct_ids(server: AcpProcess) -> None:
    ids = {
        server.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"] for _ in range(5)
    }
    assert len(ids) == 5


def test_new_session_with_zstd_compression(root: Path) -> None:
    with AcpProcess(root, "--compression", "zstd") as server:
        session_id = server.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"]
        assert (root / session_id / "session.jsonl.zst").is_file()
        assert not (root / session_id / "session.jsonl").exists()
        listed = server.result("session/list", {})["sessions"]
        assert [s["sessionId"] for s in listed] == [session_id]


@pytest.mark.parametrize(
    ("params", "path", "problem"),
    [
        (
            {"cwd": "relative/dir", "mcpServers": []},
            "$.cwd",
            "must be an absolute path, got 'relative/dir'",
        ),
        ({"cwd": "", "mcpServers": []}, "$.cwd", "must be an absolute path, got ''"),
        ({"cwd": "/a\u0000b", "mcpServers": []}, "$.cwd", "a path cannot contain NUL characters"),
        (
            {"cwd": "/w", "mcpServers": [], "additionalDirectories": ["/ok", "rel"]},
            "$.additionalDirectories[1]",
            "must be an absolute path, got 'rel'",
        ),
    ],
)
def test_new_session_refuses_a_non_absolute_path(
    server: AcpProcess, root: Path, params: Any, path: str, problem: str
) -> None:
    error = server.error("session/new", params)
    assert error == {
        "code": -32602,
        "message": f"Invalid params: {problem} - at `{path}`",
        "data": {"path": path},
    }
    assert not root.exists() or list(root.iterdir()) == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"cwd": 7, "mcpServers": []}, "Invalid params: Expected `str`, got `int` - at `$.cwd`"),
        ({"mcpServers": []}, "Invalid params: Object missing required field `cwd`"),
        (
            {"cwd": "/w", "mcpServers": "none"},
            "Invalid params: Expected `array`, got `str` - at `$.mcpServers`",
        ),
        (["/w"], "Invalid params: Expected `object`, got `array`"),
    ],
)
def test_new_session_with_wrong_params(shared: AcpProcess, params: Any, message: str) -> None:
    error = shared.error("session/new", params)
    assert error["code"] == -32602
    assert error["message"] == message


def test_absent_mcp_servers_are_taken_as_none(server: AcpProcess, root: Path) -> None:
    session_id = server.result("session/new", {"cwd": "/w"})["sessionId"]
    header = json.loads((root / session_id / "session.jsonl").read_bytes().splitlines()[0])
    assert "mcpServers" not in header


# ---------------------------------------------------------------------------------------------
# session/list.


def test_list_on_an_empty_root(server: AcpProcess) -> None:
    assert server.result("session/list", {}) == {"sessions": []}
    assert server.result("session/list") == {"sessions": []}  # params omitted
    assert server.result("session/list", {"cwd": None, "cursor": None}) == {"sessions": []}


def test_list_newest_first_with_title_and_update_time(server: AcpProcess, root: Path) -> None:
    make_session(root, "old", 1_700_000_000_000, cwd="/a")
    make_session(
        root,
        "titled",
        1_700_000_100_000,
        cwd="/b",
        events=[
            SessionTitle(0, 1_700_000_100_500, SessionTitleData("First title")),
            TurnStart(1, 1_700_000_100_600, TurnStartData(0)),
            SessionTitle(2, 1_700_000_100_700, SessionTitleData("Better title")),
            StepStart(3, 1_700_000_101_234, StepData(0, 0)),
        ],
        additional_directories=["/extra"],
    )
    make_session(root, "same-time-a", 1_700_000_050_000, cwd="/a")
    make_session(root, "same-time-b", 1_700_000_050_000, cwd="/a")
    make_session(
        root, "child", 1_700_000_200_000, cwd="/a", origin="subagent", parent_session="old"
    )
    result = server.result("session/list", {})
    assert result == {
        "sessions": [
            {
                "sessionId": "titled",
                "cwd": "/b",
                "title": "Better title",
                "updatedAt": "2023-11-14T22:15:01.234Z",
                "additionalDirectories": ["/extra"],
                "archived": False,
            },
            {
                "sessionId": "same-time-b",
                "cwd": "/a",
                "updatedAt": "2023-11-14T22:14:10.000Z",
                "archived": False,
            },
            {
                "sessionId": "same-time-a",
                "cwd": "/a",
                "updatedAt": "2023-11-14T22:14:10.000Z",
                "archived": False,
            },
            {
                "sessionId": "old",
                "cwd": "/a",
                "updatedAt": "2023-11-14T22:13:20.000Z",
                "archived": False,
            },
        ]
    }
    by_cwd = server.result("session/list", {"cwd": "/a/"})
    assert [s["sessionId"] for s in by_cwd["sessions"]] == ["same-time-b", "same-time-a", "old"]
    assert server.result("session/list", {"cwd": "/nowhere"}) == {"sessions": []}


def test_list_update_time_comes_from_the_last_event_even_in_a_row(
    server: AcpProcess, root: Path
) -> None:
    chunks = [
        AssistantChunk(
            2 + n, 1_700_000_000_100 + 10 * n, AssistantChunkData(0, 0, TextDelta(0, f"t{n}"))
        )
        for n in range(5)
    ]
    make_session(
        root,
        "rows",
        1_700_000_000_000,
        events=[
            TurnStart(0, 1_700_000_000_001, TurnStartData(0)),
            StepStart(1, 1_700_000_000_002, StepData(0, 0)),
            *chunks,
        ],
    )
    last = (root / "rows" / "session.jsonl").read_bytes().splitlines()[-1]
    assert json.loads(last)["type"] == "text-chunks"  # stored as one packed row
    assert server.result("session/list", {}) == {
        "sessions": [
            {
                "sessionId": "rows",
                "cwd": "/work",
                "updatedAt": "2023-11-14T22:13:20.140Z",
                "archived": False,
            }
        ]
    }


def test_list_pages_with_a_cursor(server: AcpProcess, root: Path) -> None:
    for n in range(250):
        make_session(root, f"s{n:03d}", 1_700_000_000_000 + n * 1000, cwd="/p" if n % 2 else "/q")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        result = server.result("session/list", {} if cursor is None else {"cursor": cursor})
        pages += 1
        seen += [s["sessionId"] for s in result["sessions"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            assert set(result) == {"sessions"}
            break
        assert isinstance(cursor, str) and len(result["sessions"]) == 100
    assert pages == 3
    assert seen == [f"s{n:03d}" for n in reversed(range(250))]
    # A session created while paging does not shift the next page.
    first = server.result("session/list", {})
    make_session(root, "newest", 1_800_000_000_000)
    second = server.result("session/list", {"cursor": first["nextCursor"]})
    assert [s["sessionId"] for s in second["sessions"]] == [
        f"s{n:03d}" for n in reversed(range(50, 150))
    ]
    # The cwd filter pages too.
    odd = server.result("session/list", {"cwd": "/p"})
    assert [s["sessionId"] for s in odd["sessions"]] == [
        f"s{n:03d}" for n in reversed(range(51, 250, 2))
    ]
    rest = server.result("session/list", {"cwd": "/p", "cursor": odd["nextCursor"]})
    assert [s["sessionId"] for s in rest["sessions"]] == [
        f"s{n:03d}" for n in reversed(range(1, 51, 2))
    ]
    assert "nextCursor" not in rest


def test_list_with_bad_params(server: AcpProcess) -> None:
    assert server.error("session/list", {"cursor": "not-a-cursor!"}) == {
        "code": -32602,
        "message": "Invalid params: not a cursor returned by session/list - at `$.cursor`",
        "data": {"path": "$.cursor"},
    }
    error = server.error("session/list", {"cwd": "rel"})
    assert error["code"] == -32602 and error["data"] == {"path": "$.cwd"}
    error = server.error("session/list", {"cursor": 5})
    assert error["message"] == "Invalid params: Expected `str | null`, got `int` - at `$.cursor`"


def test_list_skips_nothing_it_can_show(server: AcpProcess, root: Path) -> None:
    make_session(root, "fine", 1_700_000_000_000)
    make_session(root, "broken-body", 1_700_000_001_000)
    with (root / "broken-body" / "session.jsonl").open("ab") as log:
        log.write(b"not json\n")
    (root / "no-header").mkdir()
    (root / "no-header" / "session.jsonl").write_bytes(b"")
    (root / ".hidden").mkdir()
    result = server.result("session/list", {})
    # A session whose events are unreadable is still listed (the client can delete it).
    assert result == {
        "sessions": [
            {"sessionId": "broken-body", "cwd": "/work", "archived": False},
            {
                "sessionId": "fine",
                "cwd": "/work",
                "updatedAt": "2023-11-14T22:13:20.000Z",
                "archived": False,
            },
        ]
    }


# ---------------------------------------------------------------------------------------------
# session/resume, close, delete.


def test_resume_close_and_delete_a_session_from_disk(server: AcpProcess, root: Path) -> None:
    make_session(root, "disk", 1_700_000_000_000, cwd="/proj")
    assert (
        server.result("session/resume", {"sessionId": "disk", "cwd": "/proj", "mcpServers": []})
        == session_setup()
    )
    # The server holds the writer: another writer is refused while the session is open.
    with pytest.raises(LogLocked):
        SessionStore(root).continue_session("disk", 0)
    # Resuming again is harmless.
    assert server.result("session/resume", {"sessionId": "disk", "cwd": "/proj"}) == session_setup()
    assert server.result("session/close", {"sessionId": "disk"}) == {}
    SessionStore(root).continue_session("disk", 0).writer.close()  # the lock is released
    # Closing a session that is not open here does nothing.
    assert server.result("session/close", {"sessionId": "disk"}) == {}
    assert server.result("session/delete", {"sessionId": "disk"}) == {}
    assert not (root / "disk").exists()
    assert server.result("session/list", {}) == {"sessions": []}


def test_resume_recovers_an_interrupted_turn(server: AcpProcess, root: Path) -> None:
    make_session(
        root,
        "crashed",
        1_700_000_000_000,
        events=[
            TurnStart(0, 1_700_000_000_001, TurnStartData(0)),
            StepStart(1, 1_700_000_000_002, StepData(0, 0)),
        ],
    )
    assert (
        server.result("session/resume", {"sessionId": "crashed", "cwd": "/work"}) == session_setup()
    )
    lines = (root / "crashed" / "session.jsonl").read_bytes().splitlines()
    assert [json.loads(line)["type"] for line in lines] == [
        "session",
        "turn/start",
        "step/start",
        "step/end",
        "turn/end",
    ]
    assert json.loads(lines[-1])["data"] == {"turn": 0, "reason": {"kind": "interrupted"}}


def test_new_session_can_be_closed_and_resumed(server: AcpProcess, root: Path) -> None:
    session_id = server.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"]
    assert server.result("session/close", {"sessionId": session_id}) == {}
    assert (
        server.result("session/resume", {"sessionId": session_id, "cwd": "/w"}) == session_setup()
    )
    assert server.result("session/delete", {"sessionId": session_id}) == {}
    assert not (root / session_id).exists()
    # Deleted: every method now says it is unknown, but deleting it again succeeds.
    assert server.result("session/delete", {"sessionId": session_id}) == {}
    for method in ("session/resume", "session/close"):
        error = server.error(method, {"sessionId": session_id, "cwd": "/w"})
        assert error == {
            "code": -32002,
            "message": f"Unknown session: {session_id}",
            "data": {"sessionId": session_id},
        }


@pytest.mark.parametrize("method", ["session/resume", "session/close"])
def test_unknown_session_id_gives_32002(shared: AcpProcess, method: str) -> None:
    error = shared.error(method, {"sessionId": "no-such-session", "cwd": "/w"})
    assert error == {
        "code": -32002,
        "message": "Unknown session: no-such-session",
        "data": {"sessionId": "no-such-session"},
    }


def test_deleting_a_well_formed_id_that_names_no_session_succeeds(shared: AcpProcess) -> None:
    assert shared.result("session/delete", {"sessionId": "no-such-session"}) == {}


@pytest.mark.parametrize("method", ["session/resume", "session/close", "session/delete"])
@pytest.mark.parametrize("session_id", ["../etc", "a/b", "", "-x", "x" * 129, "a.b"])
def test_malformed_session_id_gives_32602(shared: AcpProcess, method: str, session_id: str) -> None:
    error = shared.error(method, {"sessionId": session_id, "cwd": "/w"})
    assert error["code"] == -32602
    assert error["data"] == {"path": "$.sessionId"}
    assert error["message"].startswith("Invalid params: invalid session id ")
    assert error["message"].endswith(
        "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$ - at `$.sessionId`"
    )


def test_session_id_of_the_wrong_type(shared: AcpProcess) -> None:
    error = shared.error("session/close", {"sessionId": 12})
    assert error == {
        "code": -32602,
        "message": "Invalid params: Expected `str`, got `int` - at `$.sessionId`",
        "data": {"path": "$.sessionId"},
    }


def test_resume_with_another_cwd_is_refused(server: AcpProcess, root: Path) -> None:
    make_session(root, "here", 1_700_000_000_000, cwd="/here")
    error = server.error("session/resume", {"sessionId": "here", "cwd": "/there"})
    assert error == {
        "code": -32602,
        "message": "Invalid params: does not match the session's working directory '/here' - at `$.cwd`",
        "data": {"path": "$.cwd"},
    }
    # Nothing was opened: another process may still continue it.
    SessionStore(root).continue_session("here", 0).writer.close()
    error = server.error("session/resume", {"sessionId": "here", "cwd": "here"})
    assert error["code"] == -32602 and error["data"] == {"path": "$.cwd"}


def test_unreadable_logs_give_a_distinct_error(server: AcpProcess, root: Path) -> None:
    make_session(root, "corrupt", 1_700_000_000_000, events=[TurnStart(0, 1, TurnStartData(0))])
    with (root / "corrupt" / "session.jsonl").open("ab") as log:
        log.write(b'{"type":"turn/start","seq":5,"time":1,"data":{"turn":1}}\n')
    error = server.error("session/resume", {"sessionId": "corrupt", "cwd": "/work"})
    assert error == {
        "code": -32010,
        "message": "Session log unreadable: line 3: seq gap: expected seq 1, found 5",
        "data": {"reason": "corrupt", "line": 3, "detail": "seq gap: expected seq 1, found 5"},
    }
    (root / "future").mkdir()
    (root / "future" / "session.jsonl").write_bytes(
        b'{"type":"session","version":999,"id":"future","createdAt":0,"cwd":"/work","newField":1}\n'
    )
    error = server.error("session/resume", {"sessionId": "future", "cwd": "/work"})
    assert error == {
        "code": -32010,
        "message": "Session log unreadable: format version 999 is not supported (this build reads version 2)",
        "data": {
            "reason": "unsupported-version",
            "found": 999,
            "supported": SESSION_FORMAT_VERSION,
        },
    }


def test_a_session_open_in_another_process_is_in_use(root: Path) -> None:
    make_session(root, "shared", 1_700_000_000_000)
    with AcpProcess(root) as first, AcpProcess(root) as second:
        assert (
            first.result("session/resume", {"sessionId": "shared", "cwd": "/work"})
            == session_setup()
        )
        expected = {
            "code": -32011,
            "message": "Session in use: another process has it open for writing",
            "data": {"reason": "locked"},
        }
        assert second.error("session/resume", {"sessionId": "shared", "cwd": "/work"}) == expected
        assert second.error("session/delete", {"sessionId": "shared"}) == expected
        assert (root / "shared").is_dir()
        assert first.result("session/close", {"sessionId": "shared"}) == {}
        assert second.result("session/delete", {"sessionId": "shared"}) == {}
        assert not (root / "shared").exists()


# ---------------------------------------------------------------------------------------------
# Notifications.


def test_cancel_notifications_get_no_answer(server: AcpProcess) -> None:
    session_id = server.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"]
    server.notify("session/cancel", {"sessionId": session_id})
    server.notify("session/cancel", {"sessionId": "unknown"})
    server.notify("session/cancel", {"sessionId": "../bad"})
    server.notify("session/cancel", {})
    server.notify("session/cancel")
    server.notify("$/cancel_request", {"requestId": 12345})
    server.notify("$/cancel_request", {"requestId": "abc"})
    server.notify("$/cancel_request", {"requestId": None})
    server.notify("$/cancel_request", {"requestId": [1]})
    server.notify("unknown/notification", {"x": 1})
    server.notify("_vendor/notification")
    # The next answer is the one to the next request: none of the above produced a frame.
    assert server.result("session/list", {})["sessions"][0]["sessionId"] == session_id


def test_cancel_request_answers_32800(server: AcpProcess, root: Path) -> None:
    # The cancellation arrives in the same read as the request: it is handled before the
    # request's task first runs, so the answer is deterministic (with a session on disk, the
    # listing waits for a worker thread, where the cancellation strikes).
    make_session(root, "one", 1_700_000_000_000)
    server.send_raw(
        b'{"jsonrpc":"2.0","id":"to-cancel","method":"session/list","params":{}}\n'
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"to-cancel"}}\n'
    )
    assert server.read_frame() == {
        "jsonrpc": "2.0",
        "id": "to-cancel",
        "error": {"code": -32800, "message": "Request cancelled"},
    }
    assert [s["sessionId"] for s in server.result("session/list", {})["sessions"]] == ["one"]


def test_a_notification_method_called_as_a_request_is_unknown(shared: AcpProcess) -> None:
    assert shared.error("session/cancel", {"sessionId": "abc"}) == {
        "code": -32601,
        "message": "Method not found",
        "data": "session/cancel",
    }


@pytest.mark.parametrize(
    "method", ["no/such/method", "_vendor/extension", "_", "session.unknown", ""]
)
def test_unknown_methods_give_32601(shared: AcpProcess, method: str) -> None:
    assert shared.error(method, {}) == {
        "code": -32601,
        "message": "Method not found",
        "data": method,
    }


# ---------------------------------------------------------------------------------------------
# Malformed input: every answer is a frame, and the connection lives on.


def test_malformed_json_then_a_valid_request(shared: AcpProcess) -> None:
    shared.send(
        b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1'
    )
    assert shared.read_frame() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: Input data was truncated"},
    }
    shared.send(b"@ not json at all")
    assert shared.read_frame()["error"] == {
        "code": -32700,
        "message": "Parse error: JSON is malformed: invalid character (byte 0)",
    }
    assert shared.initialize() == EXPECTED_INITIALIZE


def test_invalid_utf8_is_a_parse_error(shared: AcpProcess) -> None:
    shared.send(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/\xff\xfe"}}')
    assert shared.read_frame() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error: Invalid UTF-8 encoded string"},
    }
    assert shared.initialize() == EXPECTED_INITIALIZE


@pytest.mark.parametrize(
    ("line", "answer_id", "message"),
    [
        (b"42", None, "Invalid request: a request must be a JSON object"),
        (b'"initialize"', None, "Invalid request: a request must be a JSON object"),
        (b"null", None, "Invalid request: a request must be a JSON object"),
        (b"[]", None, "Invalid request: an empty array is not a request"),
        (
            b'[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}]',
            None,
            "Invalid request: batch requests are not supported",
        ),
        (b"{}", None, 'Invalid request: "jsonrpc" must be "2.0"'),
        (
            b'{"jsonrpc":"1.0","id":7,"method":"initialize"}',
            7,
            'Invalid request: "jsonrpc" must be "2.0"',
        ),
        (b'{"id":"x","method":"initialize"}', "x", 'Invalid request: "jsonrpc" must be "2.0"'),
        (b'{"jsonrpc":"2.0","id":8,"method":5}', 8, 'Invalid request: "method" must be a string'),
        (b'{"jsonrpc":"2.0","id":9}', 9, 'Invalid request: "method" must be a string'),
        (
            b'{"jsonrpc":"2.0","id":1.5,"method":"initialize"}',
            None,
            'Invalid request: "id" must be a string, an integer or null',
        ),
        (
            b'{"jsonrpc":"2.0","id":true,"method":"initialize"}',
            None,
            'Invalid request: "id" must be a string, an integer or null',
        ),
        (
            b'{"jsonrpc":"2.0","id":{},"method":"initialize"}',
            None,
            'Invalid request: "id" must be a string, an integer or null',
        ),
        (
            b'{"jsonrpc":"2.0","id":10,"method":"initialize","params":"x"}',
            10,
            'Invalid request: "params" must be an object or an array',
        ),
        (
            b'{"jsonrpc":"2.0","id":11,"method":"initialize","params":3}',
            11,
            'Invalid request: "params" must be an object or an array',
        ),
    ],
)
def test_invalid_requests_give_32600(
    shared: AcpProcess, line: bytes, answer_id: Any, message: str
) -> None:
    shared.send(line)
    assert shared.read_frame() == {
        "jsonrpc": "2.0",
        "id": answer_id,
        "error": {"code": -32600, "message": message},
    }
    assert shared.initialize() == EXPECTED_INITIALIZE


def test_string_and_null_ids_are_echoed(server: AcpProcess) -> None:
    for request_id in ("req-1", None, 0, -5, 2**53):
        server.send({"jsonrpc": "2.0", "id": request_id, "method": "session/list", "params": {}})
        assert server.read_frame() == {
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {"sessions": []},
        }


def test_blank_lines_and_crlf_are_tolerated(server: AcpProcess) -> None:
    server.send_raw(b"\n   \n\t\n")
    server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}\r\n')
    assert server.read_frame() == {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}


def test_a_response_from_the_client_to_nothing_is_dropped(server: AcpProcess) -> None:
    server.send({"jsonrpc": "2.0", "id": 99, "result": {}})
    server.send({"jsonrpc": "2.0", "id": "x", "error": {"code": 1, "message": "m"}})
    assert server.result("session/list", {}) == {"sessions": []}


# ---------------------------------------------------------------------------------------------
# Line size limit.


def test_oversized_line_is_answered_and_skipped(root: Path) -> None:
    with AcpProcess(root, "--max-line-bytes", "1024") as server:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "session/new",
            "params": {"cwd": "/" + "x" * 5000},
        }
        server.send(request)
        expected = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32600,
                "message": "Invalid request: line longer than the 1024-byte limit; it was skipped",
                "data": {"maxLineBytes": 1024},
            },
        }
        assert server.read_frame() == expected
        # Sent in pieces, with the next request in the same write as its end.
        big = json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"pad": "y" * 3000}}
        ).encode()
        server.send_raw(big[:700])
        server.send_raw(big[700:2000])
        server.send_raw(
            big[2000:] + b'\n{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}\n'
        )
        assert server.read_frame() == expected
        assert server.read_frame() == {"jsonrpc": "2.0", "id": 3, "result": {"sessions": []}}
        # A line of exactly the limit is accepted.
        body = b'{"jsonrpc":"2.0","id":4,"method":"session/list","params":{"_meta":{"p":"'
        tail = b'"}}}'
        server.send(body + b"z" * (1024 - len(body) - len(tail)) + tail)
        assert server.read_frame() == {"jsonrpc": "2.0", "id": 4, "result": {"sessions": []}}
        assert server.finish() == 0


def test_default_limit_is_64_mib(server: AcpProcess) -> None:
    limit = 64 * 1024 * 1024
    prefix = b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{"_meta":{"p":"'
    server.send(prefix + b"a" * (limit + 1 - len(prefix)))
    frame = server.read_frame(timeout=30)
    assert frame["error"] == {
        "code": -32600,
        "message": f"Invalid request: line longer than the {limit}-byte limit; it was skipped",
        "data": {"maxLineBytes": limit},
    }
    assert server.result("session/list", {}) == {"sessions": []}


# ---------------------------------------------------------------------------------------------
# End of input.


def test_eof_answers_what_was_asked_then_exits_0(root: Path) -> None:
    server = AcpProcess(root)
    with server:
        ids = [
            server.send_request("session/new", {"cwd": f"/w{n}", "mcpServers": []})
            for n in range(5)
        ]
        list_id = server.send_request("session/list", {})
        server.close_stdin()
        assert server.wait() == 0
    frames = [json.loads(line) for line in server.stdout_lines]
    responses = [f for f in frames if "id" in f]
    assert sorted(f["id"] for f in responses) == sorted([*ids, list_id])
    assert all("result" in f for f in responses)
    # Besides the answers, each new session's commands (SPEC 4.4).
    updates = [f["params"]["update"]["sessionUpdate"] for f in frames if "id" not in f]
    assert updates == ["available_commands_update"] * 5
    assert server.stdout_tail == b""
    # Every log was closed: another writer can take each one.
    store = SessionStore(root)
    session_ids = store.session_ids()
    assert len(session_ids) == 5
    for session_id in session_ids:
        store.continue_session(session_id, 0).writer.close()


def test_eof_without_a_final_newline_still_serves_the_last_line(root: Path) -> None:
    with AcpProcess(root) as server:
        server.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"session/list","params":{}}')
        server.close_stdin()
        assert server.read_frame() == {"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}}
        assert server.wait() == 0


def test_stderr_has_logs_and_stdout_only_frames(root: Path) -> None:
    with AcpProcess(root, "--log-level", "DEBUG") as server:
        server.initialize()
        server.result("session/new", {"cwd": "/w", "mcpServers": []})
        server.send(b"garbage")
        server.read_frame()
        assert server.finish() == 0
    assert "INFO acp_server.server.sessions: session" in server.stderr
    assert "served; exit status 0" in server.stderr
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in server.stdout_lines)


def test_default_log_level_keeps_stderr_quiet(server: AcpProcess) -> None:
    server.initialize()
    server.result("session/list", {})
    assert server.finish() == 0
    assert server.stderr == ""


def test_sessions_dir_from_the_environment(tmp_path: Path) -> None:
    root = tmp_path / "from-env"
    with AcpProcess(None, env={"ACP_SERVER_SESSIONS_DIR": str(root)}) as server:
        session_id = server.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"]
        assert (root / session_id / "session.jsonl").is_file()


def test_no_pack_flag_is_accepted(root: Path) -> None:
    with AcpProcess(root, "--no-pack", "--pace-ms", "5", "--max-steps", "3") as server:
        assert server.initialize() == EXPECTED_INITIALIZE
        assert server.finish() == 0


def test_bare_command_serves(root: Path) -> None:
    import sys

    with AcpProcess(
        None, "--sessions-dir", str(root), command=[sys.executable, "-m", "acp_server"]
    ) as server:
        assert server.initialize() == EXPECTED_INITIALIZE
        assert server.finish() == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_whose_shutdown_completes_exits_0(root: Path, signum: int) -> None:
    with AcpProcess(root) as server:
        session_id = server.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"]
        server.process.send_signal(signum)
        assert server.wait() == 0
    SessionStore(root).continue_session(session_id, 0).writer.close()
    assert os.path.isdir(root / session_id)


@pytest.mark.parametrize("answers_waiting", [0, 400])
def test_sigterm_ends_the_server_when_its_client_stopped_reading(
    root: Path, answers_waiting: int
) -> None:
    """A `session/load` replays megabytes to a client that reads its first bytes, then nothing:
    the server's output is stuck on a full pipe (and, with `answers_waiting`, the answers of
    that many requests wait for room behind it). SIGTERM still ends it once its shutdown grace
    has run out (before, it waited for the reader forever), with the status of a completed
    shutdown, one line on stderr, and the session's log closed whole."""
    with AcpProcess(root, "--titles", "off") as seeding:
        session_id = seeding.result("session/new", {"cwd": "/w", "mcpServers": []})["sessionId"]
        prompt = [{"type": "text", "text": "x" * 3_000_000}]  # the replay is more than a pipe holds
        response, _ = seeding.exchange(
            "session/prompt",
            {"sessionId": session_id, "prompt": prompt},
            answer=lambda _: {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
        )
        assert response["result"]["stopReason"] == "end_turn"
        assert seeding.finish() == 0
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/load",
            "params": {"sessionId": session_id, "cwd": "/w", "mcpServers": []},
        },
        *(
            {"jsonrpc": "2.0", "id": 3 + n, "method": "session/new", "params": {"cwd": "/w"}}
            for n in range(answers_waiting)
        ),
    ]
    process = subprocess.Popen(
        serve_command(root), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    try:
        process.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        process.stdin.flush()
        assert json.loads(process.stdout.readline())["id"] == 1
        assert len(process.stdout.read(65536)) == 65536  # the replay has begun; no more is read
        process.send_signal(signal.SIGTERM)
        status = process.wait(30)
        stderr = process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            pipe.close()
    assert status == 0
    assert stderr == (
        "acp-server serve: the client was not reading its output;"
        " what was left to write is dropped\n"
    )
    continued = SessionStore(root).continue_session(session_id, 0)
    continued.writer.close()
    assert (continued.dropped_torn_tail, continued.closers) == (False, [])
    assert isinstance(continued.events[-1], TurnEnd)
