"""File-system confinement of the local tool fallbacks, through the real server (SPEC 4.3).

The client advertises no `fs` capability, so the server reads and writes files itself. One turn
makes every hostile call in one step, against a session whose roots are its workspace and
`/dev` (so that device files are inside the roots and only their type can refuse them):

- device files (`/dev/zero`, `/dev/null`, a symlink to `/dev/zero`) and a FIFO are refused
  without opening them, so nothing hangs or streams forever;
- `..` paths, absolute paths elsewhere and symlinked directories leading out of the workspace are
  refused, for writes before any permission is asked, and nothing is created;
- a symlink loop fails with the system's reason;
- a huge (sparse, 8 GiB) file is read up to the 1 MiB cap, with a note saying how big it is.

`tests/test_tools.py` covers each rule on the tool functions, and `tests/test_prompt_tools.py`
reads through a symlink and `..` through the server; this file adds what only the whole
server shows: the same refusals on the wire and in the log, and a server that stays responsive.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fixtures_builder import Scenario, Step, ToolUse, args
from prompt_harness import FakeClient, PromptServer

pytestmark = pytest.mark.process

READ_CAP = 1 << 20
HUGE = 8 << 30

CALLS = [
    ToolUse("dev_zero", "read_file", args(path="/dev/zero")),
    ToolUse("dev_zero_link", "read_file", args(path="zero")),
    ToolUse("dev_null_write", "write_file", args(path="/dev/null", content="x")),
    ToolUse("fifo", "read_file", args(path="pipe")),
    ToolUse("dot_dot_read", "read_file", args(path="../outside/secret.txt")),
    ToolUse("absolute_read", "read_file", args(path="{outside}/secret.txt")),
    ToolUse("dot_dot_write", "write_file", args(path="../escape.txt", content="x")),
    ToolUse("absolute_write", "write_file", args(path="{outside}/new.txt", content="x")),
    ToolUse("link_dir_write", "write_file", args(path="link-out/new.txt", content="x")),
    ToolUse("loop", "read_file", args(path="loop")),
    ToolUse("huge", "read_file", args(path="huge.txt")),
]


@dataclass
class Turn:
    """What the one turn showed and logged, by call id, with paths normalized (`<cwd>` is the
    workspace, `<tmp>` the directory holding it and `outside/`)."""

    status: dict[str, str]
    text: dict[str, str]
    raw_output: dict[str, Any]
    logged: dict[str, dict[str, Any]]
    permissions: list[str]
    tmp: Path


def scenario(outside: Path) -> Scenario:
    calls = [ToolUse(c.id, c.name, c.arguments.replace("{outside}", str(outside))) for c in CALLS]
    return Scenario([("probe the fences", [Step(calls=calls), Step(text="Done.")])])


@pytest.fixture(scope="module")
def turn(tmp_path_factory: pytest.TempPathFactory) -> Turn:
    tmp = tmp_path_factory.mktemp("fences").resolve()
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret\n")
    client = FakeClient(permissions=["allow_once"])  # only /dev/null passes the path checks
    with PromptServer(tmp, scenario(outside), client=client) as server:
        workspace = server.workspace
        (workspace / "zero").symlink_to("/dev/zero")
        os.mkfifo(workspace / "pipe")
        (workspace / "link-out").symlink_to(outside)
        (workspace / "loop").symlink_to(workspace / "loop")
        with open(workspace / "huge.txt", "wb") as huge:
            huge.write(b"a" * READ_CAP + b"b")
            huge.truncate(HUGE)  # sparse: 8 GiB on paper, 1 MiB on disk
        result = server.request(
            "session/new",
            {"cwd": str(workspace), "mcpServers": [], "additionalDirectories": ["/dev"]},
        ).result
        session = result["sessionId"]
        server.session_ids[session] = "<session>"
        answered = server.prompt(session, "probe the fences", timeout=30)
        assert answered.stop_reason == "end_turn"
        finished = [
            u
            for u in answered.updates
            if u["sessionUpdate"] == "tool_call_update" and u["status"] != "in_progress"
        ]
        logged = {
            e["data"]["callId"]: e["data"]
            for e in server.log(session)
            if e["type"] == "tool/result"
        }
        permissions = [
            r["params"]["toolCall"]["toolCallId"]
            for r in answered.requests
            if r["method"] == "session/request_permission"
        ]
        # Still responsive after all that: the next request is answered.
        assert (
            server.request("session/new", {"cwd": str(workspace), "mcpServers": []}).result[
                "sessionId"
            ]
            != session
        )
    return Turn(
        status={u["toolCallId"]: u["status"] for u in finished},
        text={u["toolCallId"]: u["content"][0]["content"]["text"] for u in finished},
        raw_output={u["toolCallId"]: u.get("rawOutput") for u in finished},
        logged=logged,
        permissions=permissions,
        tmp=tmp,
    )


ALLOWED = "(allowed: <cwd>, /dev)"


@pytest.mark.parametrize(
    ("call_id", "text"),
    [
        ("dev_zero", "refused: /dev/zero is a character device, not a regular file"),
        ("dev_zero_link", "refused: zero is a character device, not a regular file"),
        ("dev_null_write", "refused: /dev/null is a character device, not a regular file"),
        ("fifo", "refused: pipe is a FIFO (named pipe), not a regular file"),
    ],
)
def test_device_files_and_fifos_inside_the_roots_are_refused_without_reading(
    turn: Turn, call_id: str, text: str
) -> None:
    assert (turn.status[call_id], turn.text[call_id]) == ("failed", text)
    assert turn.logged[call_id]["isError"] is True


@pytest.mark.parametrize(
    ("call_id", "text"),
    [
        (
            "dot_dot_read",
            f"refused: ../outside/secret.txt (resolved to <tmp>/outside/secret.txt) is outside the session's directories {ALLOWED}",
        ),
        (
            "absolute_read",
            f"refused: <tmp>/outside/secret.txt is outside the session's directories {ALLOWED}",
        ),
        (
            "dot_dot_write",
            f"refused: ../escape.txt (resolved to <tmp>/escape.txt) is outside the session's directories {ALLOWED}",
        ),
        (
            "absolute_write",
            f"refused: <tmp>/outside/new.txt is outside the session's directories {ALLOWED}",
        ),
        (
            "link_dir_write",
            f"refused: link-out/new.txt (resolved to <tmp>/outside/new.txt) is outside the session's directories {ALLOWED}",
        ),
    ],
)
def test_paths_leading_out_of_the_roots_are_refused(turn: Turn, call_id: str, text: str) -> None:
    assert (turn.status[call_id], turn.text[call_id]) == ("failed", text)
    assert turn.logged[call_id]["content"] == [{"type": "text", "text": text}]


def test_refused_writes_ask_no_permission_and_create_nothing(turn: Turn) -> None:
    assert turn.permissions == ["dev_null_write"]
    assert not (turn.tmp / "escape.txt").exists()
    assert sorted(p.name for p in (turn.tmp / "outside").iterdir()) == ["secret.txt"]


def test_a_symlink_loop_fails_with_the_systems_reason(turn: Turn) -> None:
    assert (turn.status["loop"], turn.text["loop"]) == (
        "failed",
        "cannot read loop: Too many levels of symbolic links",
    )


def test_a_huge_file_is_read_up_to_the_cap_with_a_note(turn: Turn) -> None:
    note = f"[truncated: file is {HUGE} bytes, showing the first {READ_CAP}]"
    assert turn.status["huge"] == "completed"
    assert turn.text["huge"] == "a" * READ_CAP + "\n\n" + note
    assert turn.raw_output["huge"] == {"path": "<cwd>/huge.txt", "truncated": True}
    assert turn.logged["huge"]["content"] == [
        {"type": "text", "text": "a" * READ_CAP + "\n\n" + note}
    ]
