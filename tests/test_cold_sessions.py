"""Sessions on disk addressed by id through the real server: what every reader refuses alike.

A log whose header names another session than its directory is corrupt for every reader (the
history API as for `session/load`). A subagent's child is part of its parent's conversation:
the ACP session methods refuse it as the history API does (SPEC 3), and `session/delete` leaves
it in place. A follower of a cold interrupted session gets the closers recovery appends when the
session is loaded, without waiting for a later event.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from acp_process import AcpProcess
from fixtures_builder import Scenario, write_fixture
from surface_values import session_setup

from acp_server.core.header import SESSION_FORMAT_VERSION

pytestmark = pytest.mark.process

WORK = "/work"
CHILD_REFUSED = {"path": "$.sessionId", "check": "origin"}


def write_log(root: Path, directory: str, body: list[dict[str, Any]], **header: Any) -> Path:
    """A plain log in `root/directory`, its header's fields overridden by `header`."""
    fields = {
        "type": "session",
        "version": SESSION_FORMAT_VERSION,
        "id": directory,
        "createdAt": 0,
        "cwd": WORK,
        **header,
    }
    path = root / directory / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(json.dumps(value).encode() + b"\n" for value in [fields, *body]))
    return path


def event(seq: int, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, "seq": seq, "time": 0, "data": data}


COMPLETED_TURN = [
    event(0, "turn/start", {"turn": 0}),
    event(1, "turn/end", {"turn": 0, "reason": {"kind": "completed"}}),
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[AcpProcess]:
    """A server over `tmp_path/sessions` with a model (so that load and prompt are served)."""
    fixture = write_fixture(tmp_path / "fixture", Scenario([]))
    with AcpProcess(tmp_path / "sessions", "--replay", str(fixture)) as process:
        process.initialize()
        yield process


@pytest.fixture
def sessions(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def address(session_id: str) -> dict[str, str]:
    return {"kind": "session", "sessionId": session_id}


# ---------------------------------------------------------------------------------------------
# A header naming another session.


@pytest.mark.parametrize("method", ["session.page", "session.follow"])
def test_the_history_api_refuses_a_log_whose_header_names_another_session(
    sessions: Path, server: AcpProcess, method: str
) -> None:
    write_log(sessions, "here", COMPLETED_TURN, id="elsewhere")
    error = server.error(method, {"address": address("here"), "throughSeq": 1})
    detail = "header id 'elsewhere' does not match the session 'here'"
    assert error == {
        "code": -32010,
        "message": f"Session log unreadable: line 1: {detail}",
        "data": {"reason": "corrupt", "line": 1, "detail": detail},
    }


def test_load_and_the_history_api_refuse_a_misnamed_log_with_the_same_error(
    sessions: Path, server: AcpProcess
) -> None:
    write_log(sessions, "here", COMPLETED_TURN, id="elsewhere")
    load = server.error("session/load", {"sessionId": "here", "cwd": WORK, "mcpServers": []})
    page = server.error("session.page", {"address": address("here"), "throughSeq": 1})
    assert page == load


# ---------------------------------------------------------------------------------------------
# Subagent children addressed as sessions of their own.


def write_family(sessions: Path) -> Path:
    """A parent whose log started the child `kid`; returns the child's log."""
    spawn = event(
        1,
        "subagent/start",
        {"turn": 0, "step": 0, "callId": "call_task", "childSessionId": "kid", "mode": "one-shot"},
    )
    write_log(
        sessions,
        "parent",
        [COMPLETED_TURN[0], spawn, {**COMPLETED_TURN[1], "seq": 2}],
    )
    return write_log(sessions, "kid", COMPLETED_TURN, origin="subagent", parentSession="parent")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("session/load", {"sessionId": "kid", "cwd": WORK, "mcpServers": []}),
        ("session/resume", {"sessionId": "kid", "cwd": WORK}),
        ("session/delete", {"sessionId": "kid"}),
    ],
)
def test_a_child_addressed_as_a_session_is_refused_naming_the_origin_check(
    sessions: Path, server: AcpProcess, method: str, params: dict[str, Any]
) -> None:
    child_log = write_family(sessions)
    before = child_log.read_bytes()
    error = server.error(method, params)
    assert (error["code"], error["data"]) == (-32602, CHILD_REFUSED)
    assert error["message"].startswith("Invalid params: session kid is a subagent's child")
    assert child_log.read_bytes() == before  # not recovered, not deleted


def test_a_child_refused_by_resume_cannot_be_prompted(sessions: Path, server: AcpProcess) -> None:
    write_family(sessions)
    server.error("session/resume", {"sessionId": "kid", "cwd": WORK})
    error = server.error(
        "session/prompt", {"sessionId": "kid", "prompt": [{"type": "text", "text": "hi"}]}
    )
    assert error["code"] == -32002


def test_the_parent_still_reaches_its_child_after_a_refused_delete(
    sessions: Path, server: AcpProcess
) -> None:
    write_family(sessions)
    server.error("session/delete", {"sessionId": "kid"})
    page = server.result(
        "session.page",
        {
            "address": {"kind": "subagent", "parentSessionId": "parent", "childSessionId": "kid"},
            "throughSeq": 1,
        },
    )
    assert [record["event"]["type"] for record in page["records"]] == ["turn/start", "turn/end"]


# ---------------------------------------------------------------------------------------------
# A follower of a cold session that recovery closes.


def test_a_follower_of_a_cold_interrupted_session_gets_the_closers_its_load_appends(
    sessions: Path, server: AcpProcess
) -> None:
    write_log(
        sessions,
        "cut",
        [
            event(0, "turn/start", {"turn": 0}),
            event(
                1,
                "user/message",
                {"turn": 0, "message": {"id": "u0", "content": [{"type": "text", "text": "hi"}]}},
            ),
            event(2, "step/start", {"turn": 0, "step": 0}),
        ],
    )
    followed = server.result("session.follow", {"address": address("cut")})
    assert followed["cursor"] == 2
    response, frames = server.exchange(
        "session/load", {"sessionId": "cut", "cwd": WORK, "mcpServers": []}
    )
    assert response["result"] == session_setup()
    delivered = [f["params"] for f in frames if f.get("method") == "session.event"]
    while len(delivered) < 2:  # nothing else is appended: these must come on their own
        frame = server.read_frame()
        if frame.get("method") == "session.event":
            delivered.append(frame["params"])
    assert [(p["subscriptionId"], p["event"]["seq"], p["event"]["type"]) for p in delivered] == [
        (followed["subscriptionId"], 3, "step/end"),
        (followed["subscriptionId"], 4, "turn/end"),
    ]
    assert delivered[1]["event"]["data"] == {"turn": 0, "reason": {"kind": "interrupted"}}
